-- Runs with x-multi-statement=true: each statement on its own, so the first one stays applied
-- when the second fails, and golang-migrate leaves version 3 dirty.
CREATE TABLE orders (id bigint PRIMARY KEY, customer bigint NOT NULL);
INSERT INTO no_such_table VALUES (1);
