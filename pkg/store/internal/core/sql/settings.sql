-- The database's settings (kagzi.settings, one row): the payload limits.

-- name: SettingsGet :one
SELECT payload_warn_bytes, payload_max_bytes FROM kagzi.settings

-- name: SettingsSet :exec
UPDATE kagzi.settings SET payload_warn_bytes = @warn_bytes, payload_max_bytes = @max_bytes, updated_at = now()
