-- +goose Up
CREATE TABLE routes (domain text PRIMARY KEY, upstream text NOT NULL, weight integer);
INSERT INTO routes VALUES ('a.example', 'http://a.internal:8080', 1);
