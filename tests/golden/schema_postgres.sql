COLUMN alembic_version.version_num character varying(32) NOT NULL
COLUMN chunks.id bigint NOT NULL DEFAULT nextval('chunks_id_seq'::regclass)
COLUMN chunks.run_id bigint NOT NULL
COLUMN chunks.keyset_id bigint NOT NULL
COLUMN chunks.id_lo bigint NOT NULL
COLUMN chunks.id_hi bigint NOT NULL
COLUMN chunks.n integer NOT NULL
COLUMN chunks.step_lo bigint NOT NULL
COLUMN chunks.step_hi bigint NOT NULL
COLUMN chunks.sealed smallint NOT NULL
COLUMN chunks.data bytea NOT NULL
COLUMN events.id bigint NOT NULL DEFAULT nextval('events_id_seq'::regclass)
COLUMN events.run_id bigint NOT NULL
COLUMN events.wall double precision NOT NULL
COLUMN events.step bigint
COLUMN events.kind character varying(32) NOT NULL
COLUMN events.level character varying(8) NOT NULL DEFAULT 'info'::character varying
COLUMN events.title text NOT NULL
COLUMN events.body text NOT NULL DEFAULT ''::text
COLUMN keys.id bigint NOT NULL DEFAULT nextval('keys_id_seq'::regclass)
COLUMN keys.name character varying(500) NOT NULL
COLUMN keysets.id bigint NOT NULL DEFAULT nextval('keysets_id_seq'::regclass)
COLUMN keysets.run_id bigint NOT NULL
COLUMN keysets.key_ids text NOT NULL
COLUMN point_ids.id smallint NOT NULL
COLUMN point_ids.next_id bigint NOT NULL
COLUMN points.id bigint NOT NULL DEFAULT nextval('points_id_seq'::regclass)
COLUMN points.run_id bigint NOT NULL
COLUMN points.key_id bigint NOT NULL
COLUMN points.step bigint NOT NULL
COLUMN points.wall double precision NOT NULL
COLUMN points.value double precision
COLUMN rollups.run_id bigint NOT NULL
COLUMN rollups.key_id bigint NOT NULL
COLUMN rollups.level smallint NOT NULL
COLUMN rollups.bucket bigint NOT NULL
COLUMN rollups.n bigint NOT NULL
COLUMN rollups.nan bigint NOT NULL
COLUMN rollups.posinf bigint NOT NULL
COLUMN rollups.neginf bigint NOT NULL
COLUMN rollups.vmin double precision
COLUMN rollups.vmax double precision
COLUMN rollups.min_at bigint
COLUMN rollups.max_at bigint
COLUMN rollups.vsum double precision
COLUMN rollups.step_lo bigint NOT NULL
COLUMN rollups.step_hi bigint NOT NULL
COLUMN rollups.last double precision
COLUMN rollups.wall_lo double precision NOT NULL
COLUMN rollups.wall_hi double precision NOT NULL
COLUMN rollups.bits bigint NOT NULL
COLUMN rollups.nonfinite_at bigint
COLUMN runs.id bigint NOT NULL DEFAULT nextval('runs_id_seq'::regclass)
COLUMN runs.uid character varying(32) NOT NULL
COLUMN runs.project character varying(200) NOT NULL
COLUMN runs.name character varying(200) NOT NULL
COLUMN runs.status character varying(16) NOT NULL
COLUMN runs.created_at double precision NOT NULL
COLUMN runs.heartbeat_at double precision NOT NULL
COLUMN runs.ended_at double precision
COLUMN runs.host character varying(255) NOT NULL DEFAULT ''::character varying
COLUMN runs.pid integer
COLUMN runs.rank integer NOT NULL DEFAULT 0
COLUMN runs.world_size integer NOT NULL DEFAULT 1
COLUMN runs.command text NOT NULL DEFAULT ''::text
COLUMN runs.git_commit character varying(64)
COLUMN runs.config text NOT NULL DEFAULT '{}'::text
COLUMN runs.summary text NOT NULL DEFAULT '{}'::text
COLUMN runs.tags text NOT NULL DEFAULT '[]'::text
COLUMN runs.notes text NOT NULL DEFAULT ''::text
COLUMN runs.heartbeat_interval double precision NOT NULL DEFAULT '1'::double precision
COLUMN runs.run_group character varying(200) NOT NULL DEFAULT ''::character varying
COLUMN runs.job_type character varying(64) NOT NULL DEFAULT ''::character varying
COLUMN runs.proc_host character varying(128)
COLUMN runs.proc_start character varying(32)
COLUMN runs.stall_after double precision
COLUMN runs.stalled_since double precision
COLUMN series.run_id bigint NOT NULL
COLUMN series.key_id bigint NOT NULL
COLUMN series.n bigint NOT NULL
COLUMN series.nan bigint NOT NULL
COLUMN series.posinf bigint NOT NULL
COLUMN series.neginf bigint NOT NULL
COLUMN series.vmin double precision
COLUMN series.vmax double precision
COLUMN series.min_at bigint
COLUMN series.max_at bigint
COLUMN series.vsum double precision
COLUMN series.step_lo bigint NOT NULL
COLUMN series.step_hi bigint NOT NULL
COLUMN series.last double precision
COLUMN series.wall_lo double precision NOT NULL
COLUMN series.wall_hi double precision NOT NULL
COLUMN series.bits bigint NOT NULL
COLUMN series.nonfinite_at bigint
COLUMN series.levels smallint NOT NULL
COLUMN series.tail_step bigint NOT NULL
COLUMN series.tail_wall double precision NOT NULL
COLUMN takes.run_id bigint NOT NULL
COLUMN takes.key_id bigint NOT NULL
COLUMN takes.since_id bigint NOT NULL
COLUMN takes.step bigint NOT NULL
CONSTRAINT alembic_version.alembic_version_pkc PRIMARY KEY (version_num)
CONSTRAINT chunks.fk_chunks_keyset_id_keysets FOREIGN KEY (keyset_id) REFERENCES keysets(id) ON DELETE CASCADE
CONSTRAINT chunks.fk_chunks_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT chunks.pk_chunks PRIMARY KEY (id)
CONSTRAINT events.ck_events_level CHECK (((level)::text = ANY ((ARRAY['info'::character varying, 'warning'::character varying, 'error'::character varying])::text[])))
CONSTRAINT events.fk_events_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT events.pk_events PRIMARY KEY (id)
CONSTRAINT keys.pk_keys PRIMARY KEY (id)
CONSTRAINT keys.uq_keys_name UNIQUE (name)
CONSTRAINT keysets.fk_keysets_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT keysets.pk_keysets PRIMARY KEY (id)
CONSTRAINT keysets.uq_keysets_run_id_key_ids UNIQUE (run_id, key_ids)
CONSTRAINT point_ids.pk_point_ids PRIMARY KEY (id)
CONSTRAINT points.fk_points_key_id_keys FOREIGN KEY (key_id) REFERENCES keys(id)
CONSTRAINT points.fk_points_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT points.pk_points PRIMARY KEY (id)
CONSTRAINT rollups.fk_rollups_key_id_keys FOREIGN KEY (key_id) REFERENCES keys(id)
CONSTRAINT rollups.fk_rollups_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT rollups.pk_rollups PRIMARY KEY (run_id, key_id, level, bucket)
CONSTRAINT runs.ck_runs_status CHECK (((status)::text = ANY ((ARRAY['running'::character varying, 'finished'::character varying, 'failed'::character varying, 'killed'::character varying, 'crashed'::character varying])::text[])))
CONSTRAINT runs.pk_runs PRIMARY KEY (id)
CONSTRAINT runs.uq_runs_uid UNIQUE (uid)
CONSTRAINT series.fk_series_key_id_keys FOREIGN KEY (key_id) REFERENCES keys(id)
CONSTRAINT series.fk_series_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT series.pk_series PRIMARY KEY (run_id, key_id)
CONSTRAINT takes.fk_takes_key_id_keys FOREIGN KEY (key_id) REFERENCES keys(id)
CONSTRAINT takes.fk_takes_run_id_runs FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
CONSTRAINT takes.pk_takes PRIMARY KEY (run_id, key_id, since_id)
CREATE UNIQUE INDEX alembic_version_pkc ON public.alembic_version USING btree (version_num)
CREATE INDEX ix_chunks_id_hi ON public.chunks USING btree (id_hi)
CREATE INDEX ix_chunks_keyset_id_step_lo ON public.chunks USING btree (keyset_id, step_lo)
CREATE INDEX ix_chunks_run_id_id_hi ON public.chunks USING btree (run_id, id_hi)
CREATE UNIQUE INDEX pk_chunks ON public.chunks USING btree (id)
CREATE INDEX ix_events_run_id_id ON public.events USING btree (run_id, id)
CREATE UNIQUE INDEX pk_events ON public.events USING btree (id)
CREATE UNIQUE INDEX pk_keys ON public.keys USING btree (id)
CREATE UNIQUE INDEX uq_keys_name ON public.keys USING btree (name)
CREATE UNIQUE INDEX pk_keysets ON public.keysets USING btree (id)
CREATE UNIQUE INDEX uq_keysets_run_id_key_ids ON public.keysets USING btree (run_id, key_ids)
CREATE UNIQUE INDEX pk_point_ids ON public.point_ids USING btree (id)
CREATE INDEX ix_points_run_id_id ON public.points USING btree (run_id, id)
CREATE INDEX ix_points_run_id_key_id_step ON public.points USING btree (run_id, key_id, step)
CREATE UNIQUE INDEX pk_points ON public.points USING btree (id)
CREATE UNIQUE INDEX pk_rollups ON public.rollups USING btree (run_id, key_id, level, bucket)
CREATE INDEX ix_runs_project_created_at ON public.runs USING btree (project, created_at)
CREATE UNIQUE INDEX pk_runs ON public.runs USING btree (id)
CREATE UNIQUE INDEX uq_runs_uid ON public.runs USING btree (uid)
CREATE UNIQUE INDEX pk_series ON public.series USING btree (run_id, key_id)
CREATE UNIQUE INDEX pk_takes ON public.takes USING btree (run_id, key_id, since_id)
