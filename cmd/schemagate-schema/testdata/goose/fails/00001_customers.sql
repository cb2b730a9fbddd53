-- +goose Up
CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL);

-- +goose Down
DROP TABLE customers;
