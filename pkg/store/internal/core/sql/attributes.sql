-- The declared kinds of a namespace's search attributes, which a start or a
-- schedule checks its attributes against.

-- name: AttributeKinds :many
SELECT name, kind FROM kagzi.search_attributes WHERE namespace_id = @namespace
