ALTER TABLE customers DROP COLUMN email;
