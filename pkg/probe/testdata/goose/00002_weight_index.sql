-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY routes_weight ON routes (weight);
