-- Every SQL statement batchgate's SQLite job store runs, as named blocks: a line `-- name --`
-- starts a block that runs to the next header. `schema` builds a fresh database; the
-- `migration_NNNN` blocks, applied in order, must build exactly the same thing (a test checks).
-- Hot paths (task_insert, task_complete) take positional parameters; the rest take named ones.

-- schema --
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL UNIQUE,
    input_path TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    output_path TEXT NOT NULL,
    config_path TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    task_total INTEGER NOT NULL,
    options BLOB NOT NULL,
    next_order INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tasks (
    job INTEGER NOT NULL REFERENCES jobs (id),
    seq INTEGER NOT NULL,
    line_no INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    body BLOB NOT NULL,
    output_line BLOB,
    error TEXT,
    provider TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    completed_order INTEGER,
    lease INTEGER,
    route TEXT,
    step TEXT,
    PRIMARY KEY (job, seq)
);
CREATE INDEX tasks_by_state ON tasks (job, state, seq);
CREATE INDEX tasks_by_completion ON tasks (job, completed_order) WHERE completed_order IS NOT NULL;
CREATE TABLE blobs (
    job INTEGER NOT NULL REFERENCES jobs (id),
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (job, key)
) WITHOUT ROWID;
CREATE INDEX tasks_by_lease ON tasks (lease) WHERE lease IS NOT NULL;
CREATE TABLE leases (
    token INTEGER PRIMARY KEY AUTOINCREMENT,
    job INTEGER NOT NULL REFERENCES jobs (id),
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX leases_by_expiry ON leases (job, expires_at);
INSERT INTO schema_version (version) VALUES (4);

-- migration_0001 --
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL UNIQUE,
    input_path TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    output_path TEXT NOT NULL,
    config_path TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    task_total INTEGER NOT NULL,
    options BLOB NOT NULL,
    next_order INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tasks (
    job INTEGER NOT NULL REFERENCES jobs (id),
    seq INTEGER NOT NULL,
    line_no INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    body BLOB NOT NULL,
    output_line BLOB,
    error TEXT,
    provider TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    completed_order INTEGER,
    PRIMARY KEY (job, seq)
);
CREATE INDEX tasks_by_state ON tasks (job, state, seq);
INSERT INTO schema_version (version) VALUES (1);

-- migration_0002 --
CREATE INDEX tasks_by_completion ON tasks (job, completed_order) WHERE completed_order IS NOT NULL;
CREATE TABLE blobs (
    job INTEGER NOT NULL REFERENCES jobs (id),
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (job, key)
) WITHOUT ROWID;
UPDATE schema_version SET version = 2;

-- migration_0003 --
ALTER TABLE tasks ADD COLUMN lease INTEGER;
CREATE INDEX tasks_by_lease ON tasks (lease) WHERE lease IS NOT NULL;
CREATE TABLE leases (
    token INTEGER PRIMARY KEY AUTOINCREMENT,
    job INTEGER NOT NULL REFERENCES jobs (id),
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX leases_by_expiry ON leases (job, expires_at);
UPDATE schema_version SET version = 3;

-- migration_0004 --
-- Fan-out and pipelines: a task may name the route and the pipeline step it runs (NULL for a
-- plain task). Nullable and unindexed: older jobs and plain runs are untouched.
ALTER TABLE tasks ADD COLUMN route TEXT;
ALTER TABLE tasks ADD COLUMN step TEXT;
UPDATE schema_version SET version = 4;

-- list_tables --
SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name;

-- get_schema_version --
SELECT max(version) FROM schema_version;

-- job_insert --
INSERT INTO jobs (job_id, input_path, input_sha256, output_path, config_path, status, stop_reason,
                  created_at, updated_at, task_total, options)
VALUES (:job_id, :input_path, :input_sha256, :output_path, :config_path, :status, :stop_reason,
        :created_at, :updated_at, :task_total, :options);

-- job_pk --
SELECT id FROM jobs WHERE job_id = :job_id;

-- job_get --
SELECT job_id, input_path, input_sha256, output_path, config_path, status, stop_reason,
       created_at, updated_at, task_total, options
FROM jobs WHERE job_id = :job_id;

-- job_list --
SELECT job_id, input_path, input_sha256, output_path, config_path, status, stop_reason,
       created_at, updated_at, task_total, options
FROM jobs ORDER BY created_at, job_id;

-- job_update --
UPDATE jobs SET
    status = coalesce(:status, status),
    stop_reason = nullif(coalesce(:stop_reason, stop_reason), ''),
    input_sha256 = coalesce(:input_sha256, input_sha256),
    options = coalesce(:options, options),
    task_total = coalesce(:task_total, task_total),
    updated_at = :updated_at
WHERE job_id = :job_id;

-- job_take_orders --
UPDATE jobs SET next_order = next_order + :count WHERE id = :job RETURNING next_order - :count;

-- task_insert --
INSERT INTO tasks (job, seq, line_no, custom_id, body, route, step) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job, seq) DO NOTHING;

-- task_insert_done --
INSERT INTO tasks (job, seq, line_no, custom_id, body, route, step, state, attempts, output_line, error,
                   provider, prompt_tokens, completion_tokens, cost_usd, completed_order)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job, seq) DO NOTHING;

-- task_claim --
UPDATE tasks SET state = 'running', lease = :token
WHERE rowid IN (
    SELECT rowid FROM tasks WHERE job = :job AND state = 'pending' ORDER BY seq LIMIT :limit
)
RETURNING seq, line_no, custom_id, body, route, step;

-- task_claim_seqs --
UPDATE tasks SET state = 'running', lease = NULL
WHERE job = :job AND state = 'pending' AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq, line_no, custom_id, body, route, step;

-- task_complete --
UPDATE tasks SET state = ?, attempts = ?, output_line = ?, error = ?, provider = ?,
                 prompt_tokens = ?, completion_tokens = ?, cost_usd = ?, completed_order = ?
WHERE job = ? AND seq = ? AND state != 'succeeded';

-- chunk_complete --
UPDATE tasks SET state = ?, attempts = ?, output_line = ?, error = ?, provider = ?,
                 prompt_tokens = ?, completion_tokens = ?, cost_usd = ?, completed_order = ?
WHERE job = ? AND seq = ? AND state = 'running' AND lease = ?;

-- task_seqs_present --
SELECT count(*) FROM tasks WHERE job = :job AND seq IN (SELECT value FROM json_each(:seqs));

-- task_requeue --
UPDATE tasks SET state = 'pending', attempts = 0, output_line = NULL, error = NULL, provider = NULL,
                 prompt_tokens = 0, completion_tokens = 0, cost_usd = 0, completed_order = NULL,
                 lease = NULL
WHERE job = :job AND state = :state;

-- task_counts --
SELECT state, count(*) FROM tasks WHERE job = :job GROUP BY state;

-- task_totals --
SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),
       coalesce(sum(cost_usd), 0.0), coalesce(sum(attempts), 0)
FROM tasks WHERE job = :job AND state IN ('succeeded', 'failed');

-- results_by_seq --
SELECT seq, line_no, custom_id, state, attempts, output_line, error, completed_order,
       CASE WHEN :with_bodies THEN body END, route, step, cost_usd
FROM tasks
WHERE job = :job AND seq > :after AND state IN (SELECT value FROM json_each(:states))
ORDER BY seq LIMIT :limit;

-- results_by_completion --
SELECT seq, line_no, custom_id, state, attempts, output_line, error, completed_order,
       CASE WHEN :with_bodies THEN body END, route, step, cost_usd
FROM tasks
WHERE job = :job AND completed_order > :after AND state IN (SELECT value FROM json_each(:states))
ORDER BY completed_order LIMIT :limit;

-- results_uncompleted_by_seq --
SELECT seq, line_no, custom_id, state, attempts, output_line, error, completed_order,
       CASE WHEN :with_bodies THEN body END, route, step, cost_usd
FROM tasks
WHERE job = :job AND completed_order IS NULL AND seq > :after
  AND state IN (SELECT value FROM json_each(:states))
ORDER BY seq LIMIT :limit;

-- task_body --
SELECT body FROM tasks WHERE job = :job AND seq = :seq;

-- blob_put --
INSERT INTO blobs (job, key, value) VALUES (:job, :key, :value)
ON CONFLICT (job, key) DO UPDATE SET value = excluded.value;

-- blob_get --
SELECT value FROM blobs WHERE job = :job AND key = :key;

-- lease_reap_tasks --
UPDATE tasks SET state = 'pending', lease = NULL
WHERE job = :job AND state = 'running'
  AND lease IN (SELECT token FROM leases WHERE job = :job AND expires_at <= :now);

-- lease_reap --
DELETE FROM leases WHERE job = :job AND expires_at <= :now;

-- lease_new --
INSERT INTO leases (job, owner, expires_at) VALUES (:job, :owner, :now + :seconds)
RETURNING token, expires_at;

-- lease_renew --
UPDATE leases SET expires_at = :now + :seconds
WHERE token = :token AND job = :job AND expires_at > :now
RETURNING expires_at;

-- lease_held --
SELECT token FROM leases WHERE token = :token AND job = :job AND expires_at > :now;

-- lease_release_tasks --
UPDATE tasks SET state = 'pending', lease = NULL
WHERE job = :job AND state = 'running' AND lease = :token
  AND EXISTS (SELECT 1 FROM leases WHERE token = :token AND job = :job);

-- lease_release --
DELETE FROM leases WHERE token = :token AND job = :job;

-- begin_write --
BEGIN IMMEDIATE;

-- commit --
COMMIT;

-- set_wal --
PRAGMA journal_mode = WAL;

-- set_synchronous --
PRAGMA synchronous = NORMAL;
