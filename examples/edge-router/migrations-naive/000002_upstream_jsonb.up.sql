-- Schema 2, the naive way: the route target becomes JSON in place, in the column the schema-1
-- binary reads. That binary still reads the column (as text) but what it reads is no longer a URL,
-- so it has no route for any domain from the moment this commits: the outage moves to every region
-- still on the schema-1 binary, and to any rollback to it. The schema-2 binary reads this column
-- as JSON (--target-format=json --target-column=upstream).
ALTER TABLE routes ALTER COLUMN upstream TYPE jsonb USING jsonb_build_object('url', upstream);
