-- Schema 2: the region a route prefers. Expand-only: the schema-1 binary never selects it, so it
-- keeps working; the schema-2 binary selects it, so it fails on a schema-1 database.
ALTER TABLE routes ADD COLUMN region text NOT NULL DEFAULT '';

UPDATE routes SET region = (ARRAY['us-east', 'eu-west', 'ap-south'])[1 + substr(domain, 2, 2)::int % 3];
