CREATE TABLE "dataset_turns" (
	"team_id" text PRIMARY KEY NOT NULL,
	"turn_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "dataset_turns" ADD CONSTRAINT "dataset_turns_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;