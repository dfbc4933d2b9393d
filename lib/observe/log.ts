import pino, { type Logger } from "pino";
import { loggableError } from "./error-cause";

/**
 * Structured logs (pino): one JSON object per line, for both processes (`proc`: app, worker,
 * launcher), at LOG_LEVEL (default info). Pretty, one line per event, when the output is a
 * terminal (`npm start` run by hand); JSON when it is a pipe or a file (a log collector).
 * Never log secrets, keys, prompts or completions: request lines carry ids, routes, statuses,
 * durations and team ids only.
 *
 * Kept on globalThis: Next.js loads the App Router's and the Pages Router's bundles separately.
 */
const holder = globalThis as unknown as { __lmpLog?: Logger };

export function logger(): Logger {
  if (holder.__lmpLog) return holder.__lmpLog;
  const level = process.env.LOG_LEVEL?.trim() || "info";
  const proc = process.env.LMP_PROCESS ?? "app";
  const pretty = process.stdout.isTTY && process.env.LOG_FORMAT !== "json";
  holder.__lmpLog = pino({
    level,
    base: { proc, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // An error's reason (its innermost cause), never a failed query's values.
    serializers: { err: loggableError },
    // Belt and braces: any of these keys is masked wherever it appears in a log object.
    redact: {
      paths: ["authorization", "*.authorization", "secret", "*.secret", "password", "*.password", "prompt", "messages"],
      censor: "[redacted]",
    },
    ...(pretty
      ? {
          transport: {
            target: "pino-pretty",
            options: { colorize: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname" },
          },
        }
      : {}),
  });
  return holder.__lmpLog;
}
