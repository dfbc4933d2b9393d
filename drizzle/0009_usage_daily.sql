CREATE TABLE "usage_daily" (
	"day" date NOT NULL,
	"team_id" text NOT NULL,
	"key_id" text NOT NULL,
	"deployment_id" text NOT NULL,
	"requests" integer DEFAULT 0 NOT NULL,
	"prompt_tokens" bigint DEFAULT 0 NOT NULL,
	"completion_tokens" bigint DEFAULT 0 NOT NULL,
	"ttft_count" integer DEFAULT 0 NOT NULL,
	"ttft_sum_ms" double precision DEFAULT 0 NOT NULL,
	"ttft_histogram" integer[] NOT NULL,
	CONSTRAINT "usage_daily_team_id_day_key_id_deployment_id_pk" PRIMARY KEY("team_id","day","key_id","deployment_id")
);
