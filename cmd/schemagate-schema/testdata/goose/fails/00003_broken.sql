-- +goose Up
CREATE TABLE orders (id bigint PRIMARY KEY, customer bigint NOT NULL);
INSERT INTO no_such_table VALUES (1);

-- +goose Down
DROP TABLE orders;
