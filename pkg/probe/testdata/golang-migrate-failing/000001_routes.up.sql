CREATE TABLE routes (domain text PRIMARY KEY, upstream text NOT NULL);
INSERT INTO routes VALUES ('a.example', 'http://a.internal:8080');
