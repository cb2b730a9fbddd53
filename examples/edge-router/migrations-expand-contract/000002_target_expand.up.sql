-- Schema 2, expand: the JSON target gets a column of its own beside the text one, filled from it,
-- and a trigger keeps the two in step for every writer, old or new. The schema-1 binary (text,
-- runs on [1, 2]) and the schema-2 binary (JSON, runs on [2, 3]) both route every domain here.
ALTER TABLE routes ADD COLUMN target jsonb;

UPDATE routes SET target = jsonb_build_object('url', upstream);

-- A writer that knows only one of the two columns sets that one; the trigger derives the other.
-- An update that changes one column (and not the other) carries the change across.
CREATE FUNCTION routes_target_in_step() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.target IS NULL THEN
            NEW.target := jsonb_build_object('url', NEW.upstream);
        ELSIF NEW.upstream IS NULL THEN
            NEW.upstream := NEW.target ->> 'url';
        END IF;
    ELSIF NEW.upstream IS DISTINCT FROM OLD.upstream AND NEW.target IS NOT DISTINCT FROM OLD.target THEN
        NEW.target := jsonb_set(coalesce(NEW.target, '{}'::jsonb), '{url}', to_jsonb(NEW.upstream));
    ELSIF NEW.target IS DISTINCT FROM OLD.target AND NEW.upstream IS NOT DISTINCT FROM OLD.upstream THEN
        NEW.upstream := NEW.target ->> 'url';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER routes_target_in_step BEFORE INSERT OR UPDATE ON routes
    FOR EACH ROW EXECUTE FUNCTION routes_target_in_step();

ALTER TABLE routes ALTER COLUMN target SET NOT NULL;
