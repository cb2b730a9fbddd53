DROP INDEX customers_email;
