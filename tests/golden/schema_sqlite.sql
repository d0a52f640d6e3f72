CREATE TABLE alembic_version (
    version_num VARCHAR(32) NOT NULL,
    CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

CREATE TABLE chunks (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    keyset_id INTEGER NOT NULL,
    id_lo BIGINT NOT NULL,
    id_hi BIGINT NOT NULL,
    n INTEGER NOT NULL,
    step_lo BIGINT NOT NULL,
    step_hi BIGINT NOT NULL,
    sealed SMALLINT NOT NULL,
    data BLOB NOT NULL,
    CONSTRAINT pk_chunks PRIMARY KEY (id),
    CONSTRAINT fk_chunks_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT fk_chunks_keyset_id_keysets FOREIGN KEY(keyset_id) REFERENCES keysets (id) ON DELETE CASCADE
);

CREATE TABLE events (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    wall FLOAT NOT NULL,
    step BIGINT,
    kind VARCHAR(32) NOT NULL,
    level VARCHAR(8) DEFAULT 'info' NOT NULL,
    title TEXT NOT NULL,
    body TEXT DEFAULT '' NOT NULL,
    CONSTRAINT pk_events PRIMARY KEY (id),
    CONSTRAINT fk_events_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT ck_events_level CHECK (level IN ('info', 'warning', 'error'))
);

CREATE INDEX ix_chunks_id_hi ON chunks (id_hi);

CREATE INDEX ix_chunks_keyset_id_step_lo ON chunks (keyset_id, step_lo);

CREATE INDEX ix_chunks_run_id_id_hi ON chunks (run_id, id_hi);

CREATE INDEX ix_events_run_id_id ON events (run_id, id);

CREATE INDEX ix_points_run_id_id ON points (run_id, id);

CREATE INDEX ix_points_run_id_key_id_step ON points (run_id, key_id, step);

CREATE INDEX ix_runs_project_created_at ON runs (project, created_at);

CREATE TABLE keys (
    id INTEGER NOT NULL,
    name VARCHAR(500) NOT NULL,
    CONSTRAINT pk_keys PRIMARY KEY (id),
    CONSTRAINT uq_keys_name UNIQUE (name)
);

CREATE TABLE keysets (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    key_ids TEXT NOT NULL,
    CONSTRAINT pk_keysets PRIMARY KEY (id),
    CONSTRAINT fk_keysets_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT uq_keysets_run_id_key_ids UNIQUE (run_id, key_ids)
);

CREATE TABLE point_ids (
    id SMALLINT NOT NULL,
    next_id BIGINT NOT NULL,
    CONSTRAINT pk_point_ids PRIMARY KEY (id)
);

CREATE TABLE points (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    step BIGINT NOT NULL,
    wall FLOAT NOT NULL,
    value FLOAT,
    CONSTRAINT pk_points PRIMARY KEY (id),
    CONSTRAINT fk_points_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT fk_points_key_id_keys FOREIGN KEY(key_id) REFERENCES keys (id)
);

CREATE TABLE rollups (
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    level SMALLINT NOT NULL,
    bucket BIGINT NOT NULL,
    n BIGINT NOT NULL,
    nan BIGINT NOT NULL,
    posinf BIGINT NOT NULL,
    neginf BIGINT NOT NULL,
    vmin FLOAT,
    vmax FLOAT,
    min_at BIGINT,
    max_at BIGINT,
    vsum FLOAT,
    step_lo BIGINT NOT NULL,
    step_hi BIGINT NOT NULL,
    last FLOAT,
    wall_lo FLOAT NOT NULL,
    wall_hi FLOAT NOT NULL,
    bits BIGINT NOT NULL,
    nonfinite_at BIGINT,
    CONSTRAINT pk_rollups PRIMARY KEY (run_id, key_id, level, bucket),
    CONSTRAINT fk_rollups_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT fk_rollups_key_id_keys FOREIGN KEY(key_id) REFERENCES keys (id)
)
 WITHOUT ROWID
;

CREATE TABLE runs (
    id INTEGER NOT NULL,
    uid VARCHAR(32) NOT NULL,
    project VARCHAR(200) NOT NULL,
    name VARCHAR(200) NOT NULL,
    status VARCHAR(16) NOT NULL,
    created_at FLOAT NOT NULL,
    heartbeat_at FLOAT NOT NULL,
    ended_at FLOAT,
    host VARCHAR(255) DEFAULT '' NOT NULL,
    pid INTEGER,
    rank INTEGER DEFAULT '0' NOT NULL,
    world_size INTEGER DEFAULT '1' NOT NULL,
    command TEXT DEFAULT '' NOT NULL,
    git_commit VARCHAR(64),
    config TEXT DEFAULT '{}' NOT NULL,
    summary TEXT DEFAULT '{}' NOT NULL,
    tags TEXT DEFAULT '[]' NOT NULL,
    notes TEXT DEFAULT '' NOT NULL,
    heartbeat_interval FLOAT DEFAULT '1.0' NOT NULL, run_group VARCHAR(200) DEFAULT '' NOT NULL, job_type VARCHAR(64) DEFAULT '' NOT NULL, proc_host VARCHAR(128), proc_start VARCHAR(32), stall_after FLOAT, stalled_since FLOAT,
    CONSTRAINT pk_runs PRIMARY KEY (id),
    CONSTRAINT uq_runs_uid UNIQUE (uid),
    CONSTRAINT ck_runs_status CHECK (status IN ('running', 'finished', 'failed', 'killed', 'crashed'))
);

CREATE TABLE series (
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    n BIGINT NOT NULL,
    nan BIGINT NOT NULL,
    posinf BIGINT NOT NULL,
    neginf BIGINT NOT NULL,
    vmin FLOAT,
    vmax FLOAT,
    min_at BIGINT,
    max_at BIGINT,
    vsum FLOAT,
    step_lo BIGINT NOT NULL,
    step_hi BIGINT NOT NULL,
    last FLOAT,
    wall_lo FLOAT NOT NULL,
    wall_hi FLOAT NOT NULL,
    bits BIGINT NOT NULL,
    nonfinite_at BIGINT,
    levels SMALLINT NOT NULL,
    tail_step BIGINT NOT NULL,
    tail_wall FLOAT NOT NULL,
    CONSTRAINT pk_series PRIMARY KEY (run_id, key_id),
    CONSTRAINT fk_series_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT fk_series_key_id_keys FOREIGN KEY(key_id) REFERENCES keys (id)
)
 WITHOUT ROWID
;

CREATE TABLE takes (
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    since_id BIGINT NOT NULL,
    step BIGINT NOT NULL,
    CONSTRAINT pk_takes PRIMARY KEY (run_id, key_id, since_id),
    CONSTRAINT fk_takes_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    CONSTRAINT fk_takes_key_id_keys FOREIGN KEY(key_id) REFERENCES keys (id)
)
 WITHOUT ROWID
;
