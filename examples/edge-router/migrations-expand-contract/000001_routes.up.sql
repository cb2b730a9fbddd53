-- Schema 1: one route per domain. Seeds 20 domains, d00.example … d19.example.
CREATE TABLE routes (
    domain   text PRIMARY KEY,
    upstream text NOT NULL
);

INSERT INTO routes (domain, upstream)
SELECT format('d%s.example', lpad(i::text, 2, '0')),
       format('http://upstream-%s.internal:8080', lpad(i::text, 2, '0'))
FROM generate_series(0, 19) AS i;
