-- +goose Up
CREATE INDEX customers_email ON customers (email);

-- +goose Down
DROP INDEX customers_email;
