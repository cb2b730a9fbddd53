-- +goose Up
ALTER TABLE customers ADD COLUMN email text;

-- +goose Down
ALTER TABLE customers DROP COLUMN email;
