ALTER TABLE customers ADD COLUMN email text;
