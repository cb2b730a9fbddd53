CREATE INDEX customers_email ON customers (email);
