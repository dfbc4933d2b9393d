import { redirect } from "next/navigation";
import { getSessionUser } from "@/lib/auth/session";

// The dashboard for a signed-in user, the sign-in page for anyone else.
export default async function Home() {
  redirect((await getSessionUser()) ? "/pipelines" : "/sign-in");
}
