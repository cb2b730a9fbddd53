-- +goose NO TRANSACTION
-- +goose Up
-- A file that takes its transactions into its own hands.
BEGIN;
ALTER TABLE routes ADD COLUMN region text;
COMMIT;
BEGIN;
ALTER TABLE routes RENAME COLUMN upstream TO target;
COMMIT;
