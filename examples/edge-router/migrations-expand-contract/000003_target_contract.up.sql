-- Schema 3, contract: the text target goes, with the trigger that kept it in step. Only the
-- schema-2 binary (JSON, runs on [2, 3]) runs here; run this once no pod of the schema-1 binary
-- exists and none can come back (schemagate's spec.schema.contract).
DROP TRIGGER routes_target_in_step ON routes;
DROP FUNCTION routes_target_in_step();
ALTER TABLE routes DROP COLUMN upstream;
