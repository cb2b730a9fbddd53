-- Fails on the row schema 1 seeds: its upstream is not an integer.
ALTER TABLE routes ALTER COLUMN upstream TYPE integer USING upstream::integer;
