package main

// helpText is printed by --help, help, and -h on each command.
const helpText = `schemagate-schema reports the schema version of a PostgreSQL database as a schema report: one
line of JSON (docs/schema-report.md) that a Job's container writes to its termination message,
where schemagate reads it. It reads the table your migration tool keeps; it never writes to the
database (one read-only transaction).

Usage:
  schemagate-schema report --tool TOOL [flags]
  schemagate-schema run --tool TOOL [flags] -- COMMAND [ARG...]
  schemagate-schema probe install --to FILE
  schemagate-schema probe copy --catalog FILE [flags]
  schemagate-schema probe report --catalog FILE [flags]
  schemagate-schema help            (also --help, and -h after a command)

Commands:
  report   Connect to the database, read the version as TOOL records it, and write the report
           to the report path and to stdout. For a read-only check Job.
  run      Run COMMAND, your own migration (stdin, stdout and stderr passed through; SIGTERM
           and SIGINT forwarded to it), then report as above, whatever COMMAND's exit: a
           migration that failed half-way reports the dirty database it left. COMMAND's
           database sessions are named by PGAPPNAME (unless set); any still there once it
           has exited, or 2s after a SIGTERM it ignores, are ended, so that none keeps
           waiting for a lock after the pod is gone.
  probe    The steps around a migration run on a scratch database, to see what it changes
           before it reaches the real one. copy: pg_dump --schema-only of the database in
           $SOURCE_DATABASE_URL (read only: SELECT on its tables, as pg_read_all_data gives),
           loaded with psql into the scratch database in $DATABASE_URL, with the rows of the
           migration tools' own tables, so the migration command sees the version the source
           is at; then the scratch catalog is written to --catalog. Run the migration command on
           the scratch database next. report: the catalog again, compared with --catalog, each
           change classified (expand, conditional, breaking), written as a probe report
           (probe-report/v1) to the report path. Needs pg_dump and psql on the PATH (copy).
           Flags: --catalog FILE (required), --database-url-env, --source-url-env (copy),
           --report-path (report), --timeout (default 5m). install: copies this binary to
           --to FILE, for a probe pod whose other steps run in the database's image.

Flags (report and run):
  --tool TOOL               golang-migrate, goose, flyway, atlas or liquibase (required)
  --table NAME              the tool's table (default: the tool's own, below); case-sensitive
  --schema NAME             the PostgreSQL schema holding the table (default: the search_path;
                            for atlas: atlas_schema_revisions)
  --lock-table NAME         liquibase only: its lock table, in the changelog table's schema
                            (default databasechangeloglock)
  --database-url-env NAME   the environment variable holding the database URL (default
                            DATABASE_URL); a postgres:// URL or key=value string as pgx reads
                            it. Give it from a Secret; the password is never printed.
  --report-path PATH        where to write the report (default: $TERMINATION_MESSAGE_PATH, else
                            /dev/termination-log; "-": stdout only). When the default
                            /dev/termination-log does not exist (not in Kubernetes), that is
                            said on stderr and the report is on stdout only.
  --timeout DURATION        bounds connecting to the database and reading (default 30s); also
                            the read's statement_timeout
  --require VERSION         report only: exit 4 when the database is clean but below VERSION,
                            e.g. --require $(SCHEMAGATE_SCHEMA_VERSION) in a shard's job check
                            run in its own cluster, against that region's database endpoint
  --lock-timeout DURATION   the longest the read waits for a lock on the tool's table
                            (lock_timeout, default 2s, or half of a shorter --timeout): a read never
                            queues behind a migration that waits for a lock

Tools and what they record:
  golang-migrate   schema_migrations: version, dirty. No table or no row: 0.
  goose            goose_db_version: the newest applied row not rolled back (is_applied =
                   false rolls a version back). No table: 0. Never dirty: goose has no flag.
  flyway           flyway_schema_history: the highest successful version (1_2 is read as 1.2;
                   DELETE and UNDO rows take a version back out). A row with success = false:
                   dirty. No table: 0.
  atlas            atlas_schema_revisions.atlas_schema_revisions: the highest revision with
                   applied = total and no error (baselines count). A partial or failed
                   revision: dirty. No table: 0.
  liquibase        databasechangelog: the tag of the latest tagged changeset (v1.2 is read as
                   1.2; no tag: 0). Dirty when databasechangeloglock is held (by a Liquibase
                   that died mid-update, or one running right now) or a changeset FAILED.
  A version that is not dotted numeric (like 2 or 2026.10.1) is an error naming it, not a report.

Exit codes:
  0   report written; the database is clean
  1   usage error: unknown command, flag or tool, no command for run, the URL variable unset
      or unusable. Nothing is run or read.
  probe: 0 done; 1 a usage error; 2 the step failed (nothing reported).
  2   no report: could not connect or read the version (or it is not a version), or could not
      write the report path. Nothing is written to the report path.
  3   report written; the database is dirty: a person must repair it. A check Job retries per
      its backoffLimit, then fails.
  4   report only, with --require: report written; the database is clean but below VERSION.
  run: a non-zero exit code of COMMAND is returned as is (128+N when signal N killed it, 127
  when it was not found, 126 when it could not be executed), whatever the report. When COMMAND succeeded but no report could be
  produced, 2: a missing report must not look like success.

Example Job containers (the URL from a Secret):
  report (a check Job):
      containers:
        - name: schema-check
          image: registry.example.com/shop/migrations:1.4.0
          command: ["schemagate-schema", "report", "--tool", "goose"]
          env:
            - name: DATABASE_URL
              valueFrom:
                secretKeyRef: {name: shop-db, key: url}
  run (a migration Job):
      containers:
        - name: migrate
          image: registry.example.com/shop/migrations:1.4.0
          command: ["schemagate-schema", "run", "--tool", "goose", "--",
                    "sh", "-c", "goose -dir /migrations postgres \"$DATABASE_URL\" up"]
          env:
            - name: DATABASE_URL
              valueFrom:
                secretKeyRef: {name: shop-db, key: url}

More, with an example for each tool: docs/schemagate-schema.md.
`
