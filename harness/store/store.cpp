// Schema, migrations, statements and the writer thread of the results store.
//
// All SQL lives here, prepared once when the store opens. The schema is a
// public interface documented in docs/schema.md; change it only by adding a
// rung to the migration ladder in migrate().
#include <harness/store/store.hpp>

#include <harness/store/body_difference.hpp>
#include <harness/store/derived_sql.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/schema.hpp>
#include <harness/store/splice.hpp>
#include <harness/store/view_sql.hpp>
#include <harness/store/wal_fit.hpp>
#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

namespace {

// Schema version 1: runs, servers, questions, requests, responses, and the
// derived tables classify/score fill (recomputable from the rest).
constexpr std::string_view k_schema_v1 = R"sql(
CREATE TABLE runs (
    run_id           INTEGER PRIMARY KEY,
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    status           TEXT NOT NULL DEFAULT 'running',
    dataset          TEXT NOT NULL,
    config_json      TEXT NOT NULL,
    diffeval_version TEXT NOT NULL
);
CREATE TABLE servers (
    name      TEXT PRIMARY KEY,
    url       TEXT NOT NULL,
    model     TEXT,
    info_json TEXT NOT NULL DEFAULT '{}',
    log_path  TEXT,
    log_text  TEXT,
    facts_json TEXT
);
CREATE TABLE questions (
    dataset      TEXT NOT NULL,
    question_idx INTEGER NOT NULL,
    question     TEXT NOT NULL,
    answer       TEXT NOT NULL,
    PRIMARY KEY (dataset, question_idx)
);
CREATE TABLE requests (
    request_id   INTEGER PRIMARY KEY,
    request_key  TEXT NOT NULL UNIQUE,
    server       TEXT NOT NULL,
    framing      TEXT NOT NULL,
    max_tokens   INTEGER NOT NULL,
    repeat       INTEGER NOT NULL,
    question_idx INTEGER NOT NULL,
    dataset      TEXT NOT NULL,
    body_sha256  TEXT NOT NULL,
    request_json TEXT NOT NULL,
    response_id  INTEGER
);
CREATE INDEX requests_group ON requests (server, framing, max_tokens, repeat, question_idx);
CREATE TABLE responses (
    response_id       INTEGER PRIMARY KEY,
    request_id        INTEGER NOT NULL REFERENCES requests (request_id),
    run_id            INTEGER REFERENCES runs (run_id),
    ok                INTEGER NOT NULL,
    status            INTEGER NOT NULL,
    response_json     TEXT NOT NULL,
    text              TEXT,
    reasoning         TEXT,
    finish_reason     TEXT,
    stop_reason,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    attempts          INTEGER NOT NULL,
    latency_ms        REAL NOT NULL,
    ttft_ms           REAL,
    streamed          INTEGER NOT NULL DEFAULT 0,
    token_gaps_ms     TEXT,
    started_at        TEXT NOT NULL,
    error             TEXT,
    error_kind        TEXT
);
CREATE INDEX responses_request ON responses (request_id);
CREATE TABLE classifications (
    response_id       INTEGER PRIMARY KEY REFERENCES responses (response_id),
    opened            INTEGER NOT NULL,
    closed            INTEGER NOT NULL,
    reasoning_started INTEGER NOT NULL,
    outcome           TEXT NOT NULL
);
CREATE TABLE scores (
    response_id    INTEGER NOT NULL REFERENCES responses (response_id),
    scorer         TEXT NOT NULL,
    scorer_version INTEGER NOT NULL,
    score_text     TEXT NOT NULL,
    extracted      TEXT NOT NULL,
    valid          INTEGER NOT NULL,
    correct        INTEGER NOT NULL,
    PRIMARY KEY (response_id, scorer)
);
CREATE VIEW v_responses AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.dataset,
       q.request_json, r.response_json, r.text, r.reasoning, r.finish_reason,
       r.stop_reason, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ttft_ms,
       r.status, r.error, r.error_kind, r.attempts, r.started_at, r.ok, r.streamed,
       r.token_gaps_ms,
       c.outcome, c.reasoning_started, r.response_id, q.request_id, q.request_key
FROM requests q
JOIN responses r ON r.response_id = q.response_id
LEFT JOIN classifications c ON c.response_id = r.response_id;
CREATE VIEW v_scores AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, s.scorer,
       s.extracted, s.correct, s.valid, s.response_id
FROM requests q
JOIN scores s ON s.response_id = q.response_id;
)sql";

// Version 2: the requests that have a response, found by it, with their place
// in the matrix. Analysis passes read this small index instead of visiting
// each request's row, which holds the whole request body.
constexpr std::string_view k_schema_v2 = R"sql(
CREATE INDEX requests_counted ON requests
    (response_id, server, framing, max_tokens, repeat, question_idx, dataset);
)sql";

// Version 3: a content hash of each question (its text and gold answer) on
// the question and on every request, so analysis pairs two groups by what
// they asked and not by an index that means another question in another
// dataset. The counted-requests index carries it, so loading still never
// visits the requests' large rows. Existing rows are backfilled by
// backfill_question_hashes (a hash needs C++, not SQL).
constexpr std::string_view k_schema_v3 = R"sql(
ALTER TABLE questions ADD COLUMN question_sha256 TEXT;
ALTER TABLE requests ADD COLUMN question_sha256 TEXT;
DROP INDEX requests_counted;
CREATE INDEX requests_counted ON requests
    (response_id, server, framing, max_tokens, repeat, question_idx, dataset, question_sha256);
)sql";

// Version 4: what a response had set aside (`notes`, e.g. a token count that
// was no count) and whether a secret was cut out of it (`redacted`).
constexpr std::string_view k_schema_v4 = R"sql(
ALTER TABLE responses ADD COLUMN notes TEXT;
ALTER TABLE responses ADD COLUMN redacted INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 5: which response field named the stop (responses.stop_field) and
// what stopped the response as classified (classifications.stop_cause), so a
// stop cause the server never stated is counted as unknown instead of
// guessed. Stored responses get the field their body shows.
constexpr std::string_view k_schema_v5 = R"sql(
ALTER TABLE responses ADD COLUMN stop_field TEXT;
ALTER TABLE classifications ADD COLUMN stop_cause TEXT;
UPDATE responses SET stop_field = 'stop_reason' WHERE instr(response_json, '"stop_reason"') > 0;
UPDATE responses SET stop_field = 'matched_stop'
    WHERE stop_field IS NULL AND instr(response_json, '"matched_stop"') > 0;
UPDATE responses SET stop_field = 'finish_reason'
    WHERE stop_field IS NULL AND finish_reason IN ('eos_token', 'stop_sequence');
DROP VIEW IF EXISTS v_responses;
CREATE VIEW v_responses AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.dataset,
       q.request_json, r.response_json, r.text, r.reasoning, r.finish_reason,
       r.stop_reason, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ttft_ms,
       r.status, r.error, r.error_kind, r.attempts, r.started_at, r.ok, r.streamed,
       r.token_gaps_ms,
       c.outcome, c.reasoning_started, r.response_id, q.request_id, q.request_key,
       r.stop_field, c.stop_cause
FROM requests q
JOIN responses r ON r.response_id = q.response_id
LEFT JOIN classifications c ON c.response_id = r.response_id;
)sql";

// Version 8: the decision-point probe (docs/probe.md). Probe requests and
// their responses live in their own tables, so nothing that counts answers
// can count them; v_probes combines each question's chain into P(open).
constexpr std::string_view k_schema_v8 = R"sql(
CREATE TABLE probe_requests (
    probe_request_id INTEGER PRIMARY KEY,
    request_key      TEXT NOT NULL UNIQUE,
    probe            TEXT NOT NULL,
    step             INTEGER NOT NULL,
    server           TEXT NOT NULL,
    framing          TEXT NOT NULL,
    repeat           INTEGER NOT NULL,
    question_idx     INTEGER NOT NULL,
    dataset          TEXT NOT NULL,
    body_sha256      TEXT NOT NULL,
    request_json     TEXT NOT NULL,
    response_id      INTEGER
);
CREATE INDEX probe_requests_group ON probe_requests (probe, server, framing, repeat, question_idx);
CREATE TABLE probe_responses (
    response_id       INTEGER PRIMARY KEY,
    probe_request_id  INTEGER NOT NULL REFERENCES probe_requests (probe_request_id),
    run_id            INTEGER REFERENCES runs (run_id),
    ok                INTEGER NOT NULL,
    status            INTEGER NOT NULL,
    response_json     TEXT NOT NULL,
    attempts          INTEGER NOT NULL,
    latency_ms        REAL NOT NULL,
    started_at        TEXT NOT NULL,
    error             TEXT,
    error_kind        TEXT,
    chosen            TEXT,
    top_json          TEXT,
    p_marker          REAL,
    marker_listed     INTEGER,
    p_whitespace      REAL,
    whitespace_listed INTEGER,
    floor             REAL
);
CREATE VIEW v_probes AS
SELECT q.probe, q.server, q.framing, q.repeat, q.question_idx, q.dataset,
       r.p_marker AS p_direct,
       r.p_whitespace,
       r2.p_marker AS p_after_whitespace,
       CASE WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1)
            THEN min(1.0, CASE WHEN r.marker_listed = 1 THEN r.p_marker ELSE 0 END +
                 CASE WHEN r.whitespace_listed = 1 AND r2.marker_listed = 1
                      THEN r.p_whitespace * r2.p_marker ELSE 0 END)
            ELSE r.floor END AS p_open,
       CASE WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1)
            THEN 0 ELSE 1 END AS bounded,
       r.chosen, r.top_json, r2.top_json AS top_after_whitespace,
       r.response_id, r2.response_id AS response_id_after_whitespace
FROM probe_requests q
JOIN probe_responses r ON r.response_id = q.response_id AND r.ok = 1
LEFT JOIN probe_requests q2 ON q2.probe = q.probe AND q2.step = 1 AND q2.server = q.server
     AND q2.framing = q.framing AND q2.repeat = q.repeat AND q2.question_idx = q.question_idx
     AND q2.dataset = q.dataset
LEFT JOIN probe_responses r2 ON r2.response_id = q2.response_id AND r2.ok = 1
WHERE q.step = 0;
)sql";

// Version 9: request bodies stored once per distinct body, content-addressed
// by their sha256; a request row points at its body. A run sends the same
// body to every server and repeat, so most request rows repeated a body of
// several kilobytes (5,276 distinct bodies among 47,484 requests in the
// official demo). Probe requests send the same body to every server and
// repeat too (3,957 distinct among 35,613), and share the table. Users read
// bodies through v_responses, v_requests and v_probe_requests.
constexpr std::string_view k_schema_v9 = R"sql(
CREATE TABLE request_bodies (
    body_id      INTEGER PRIMARY KEY,
    body_sha256  TEXT NOT NULL UNIQUE,
    request_json TEXT NOT NULL
);
INSERT INTO request_bodies (body_sha256, request_json)
SELECT body_sha256, request_json FROM requests GROUP BY body_sha256 ORDER BY min(request_id);
ALTER TABLE requests ADD COLUMN body_id INTEGER REFERENCES request_bodies (body_id);
UPDATE requests SET body_id =
    (SELECT b.body_id FROM request_bodies b WHERE b.body_sha256 = requests.body_sha256);
DROP VIEW v_responses;
ALTER TABLE requests DROP COLUMN request_json;
CREATE VIEW v_responses AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.dataset,
       b.request_json, r.response_json, r.text, r.reasoning, r.finish_reason,
       r.stop_reason, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ttft_ms,
       r.status, r.error, r.error_kind, r.attempts, r.started_at, r.ok, r.streamed,
       r.token_gaps_ms,
       c.outcome, c.reasoning_started, r.response_id, q.request_id, q.request_key,
       r.stop_field, c.stop_cause
FROM requests q
JOIN responses r ON r.response_id = q.response_id
JOIN request_bodies b ON b.body_id = q.body_id
LEFT JOIN classifications c ON c.response_id = r.response_id;
INSERT OR IGNORE INTO request_bodies (body_sha256, request_json)
SELECT body_sha256, request_json FROM probe_requests GROUP BY body_sha256
ORDER BY min(probe_request_id);
ALTER TABLE probe_requests ADD COLUMN body_id INTEGER REFERENCES request_bodies (body_id);
UPDATE probe_requests SET body_id =
    (SELECT b.body_id FROM request_bodies b WHERE b.body_sha256 = probe_requests.body_sha256);
ALTER TABLE probe_requests DROP COLUMN request_json;
CREATE VIEW v_probe_requests AS
SELECT q.probe_request_id, q.request_key, q.probe, q.step, q.server, q.framing, q.repeat,
       q.question_idx, q.dataset, q.body_sha256, b.request_json, q.response_id, q.body_id
FROM probe_requests q
JOIN request_bodies b ON b.body_id = q.body_id;
CREATE VIEW v_requests AS
SELECT q.request_id, q.request_key, q.server, q.framing, q.max_tokens, q.repeat,
       q.question_idx, q.dataset, q.body_sha256, b.request_json, q.response_id,
       q.question_sha256, q.body_id
FROM requests q
JOIN request_bodies b ON b.body_id = q.body_id;
)sql";

// Version 10: users' own scorers (`diffeval rescore --scorer-file`), kept as
// the text of their files, so every later scoring pass (a resumed run, an
// import, a merge) scores with the same rules as the first. Built-in scorers
// are compiled into diffeval and not stored.
constexpr std::string_view k_schema_v10 = R"sql(
CREATE TABLE scorers (
    name       TEXT PRIMARY KEY,
    version    INTEGER NOT NULL,
    definition TEXT NOT NULL,
    origin     TEXT NOT NULL,
    added_at   TEXT NOT NULL
);
)sql";

// Version 11: spliced bodies (splice.hpp). A stored body no longer repeats
// the text its row holds in other columns: the completion's text and
// reasoning in `responses`, the top alternatives in `probe_responses`: 36 MB
// of the official demo's 226 MB file. The slot left in the body is put
// back by v_responses and the new v_probe_responses, so what users read is
// unchanged; rows stored before keep their whole bodies (spliced = 0).
// `scores` becomes a WITHOUT ROWID table: its primary key was an index
// beside the table, holding every key twice. `requests.body_sha256` and
// `probe_requests.body_sha256` repeated what body_id points at; the views
// read it from `request_bodies`. `requests_counted` holds only answered
// requests: an unanswered one no longer enters it to move when answered. It
// no longer carries the question's hash, 64 bytes an entry: since version 9
// a request row is small, and reading the hash from it costs no measurable
// time (summary and report of the official demo).
constexpr std::string_view k_schema_v11 = R"sql(
DROP VIEW v_scores;
CREATE TABLE scores_v11 (
    response_id    INTEGER NOT NULL REFERENCES responses (response_id),
    scorer         TEXT NOT NULL,
    scorer_version INTEGER NOT NULL,
    score_text     TEXT NOT NULL,
    extracted      TEXT NOT NULL,
    valid          INTEGER NOT NULL,
    correct        INTEGER NOT NULL,
    PRIMARY KEY (response_id, scorer)
) WITHOUT ROWID;
INSERT INTO scores_v11 (response_id, scorer, scorer_version, score_text, extracted, valid, correct)
SELECT response_id, scorer, scorer_version, score_text, extracted, valid, correct FROM scores;
DROP TABLE scores;
ALTER TABLE scores_v11 RENAME TO scores;
CREATE VIEW v_scores AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, s.scorer,
       s.extracted, s.correct, s.valid, s.response_id
FROM requests q
JOIN scores s ON s.response_id = q.response_id;
DROP VIEW v_requests;
DROP VIEW v_probe_requests;
ALTER TABLE requests DROP COLUMN body_sha256;
ALTER TABLE probe_requests DROP COLUMN body_sha256;
CREATE VIEW v_requests AS
SELECT q.request_id, q.request_key, q.server, q.framing, q.max_tokens, q.repeat,
       q.question_idx, q.dataset, b.body_sha256, b.request_json, q.response_id,
       q.question_sha256, q.body_id
FROM requests q
JOIN request_bodies b ON b.body_id = q.body_id;
CREATE VIEW v_probe_requests AS
SELECT q.probe_request_id, q.request_key, q.probe, q.step, q.server, q.framing, q.repeat,
       q.question_idx, q.dataset, b.body_sha256, b.request_json, q.response_id, q.body_id
FROM probe_requests q
JOIN request_bodies b ON b.body_id = q.body_id;
DROP INDEX requests_counted;
CREATE INDEX requests_counted ON requests
    (response_id, server, framing, max_tokens, repeat, question_idx, dataset)
    WHERE response_id IS NOT NULL;
ALTER TABLE responses ADD COLUMN spliced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE probe_responses ADD COLUMN spliced INTEGER NOT NULL DEFAULT 0;
DROP VIEW v_responses;
CREATE VIEW v_responses AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.dataset,
       b.request_json,
       CASE WHEN r.spliced = 1
            THEN replace(replace(r.response_json, '{"$diffeval":"text"}', json_quote(r.text)),
                         '{"$diffeval":"reasoning"}', json_quote(r.reasoning))
            ELSE r.response_json END AS response_json,
       r.text, r.reasoning, r.finish_reason,
       r.stop_reason, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ttft_ms,
       r.status, r.error, r.error_kind, r.attempts, r.started_at, r.ok, r.streamed,
       r.token_gaps_ms,
       c.outcome, c.reasoning_started, r.response_id, q.request_id, q.request_key,
       r.stop_field, c.stop_cause
FROM requests q
JOIN responses r ON r.response_id = q.response_id
JOIN request_bodies b ON b.body_id = q.body_id
LEFT JOIN classifications c ON c.response_id = r.response_id;
CREATE VIEW v_probe_responses AS
SELECT r.response_id, r.probe_request_id, r.run_id, r.ok, r.status,
       CASE WHEN r.spliced = 1
            THEN replace(r.response_json, '{"$diffeval":"top_json"}',
                         '{' || (SELECT group_concat(json_quote(e.value ->> 0) || ':' ||
                                                     (e.value -> 1), ',')
                                 FROM json_each(r.top_json) e) || '}')
            ELSE r.response_json END AS response_json,
       r.attempts, r.latency_ms, r.started_at, r.error, r.error_kind, r.chosen, r.top_json,
       r.p_marker, r.marker_listed, r.p_whitespace, r.whitespace_listed, r.floor
FROM probe_responses r;
)sql";

// Version 12: request bodies after a shared prefix. A plan's bodies of one
// framing start with the same few-shot block, 2.2 of their 2.5 KB: it is
// stored once in `body_prefixes`, and a body row whose prefix_id is set
// holds only the bytes after it. v_request_bodies puts the two together, and
// v_requests, v_probe_requests and v_responses read bodies from it, so what
// users read is unchanged; rows stored before keep their whole bodies
// (prefix_id NULL).
constexpr std::string_view k_schema_v12 = R"sql(
CREATE TABLE body_prefixes (
    prefix_id     INTEGER PRIMARY KEY,
    prefix_sha256 TEXT NOT NULL UNIQUE,
    text          TEXT NOT NULL
);
ALTER TABLE request_bodies ADD COLUMN prefix_id INTEGER REFERENCES body_prefixes (prefix_id);
CREATE VIEW v_request_bodies AS
SELECT b.body_id, b.body_sha256, coalesce(p.text, '') || b.request_json AS request_json
FROM request_bodies b
LEFT JOIN body_prefixes p ON p.prefix_id = b.prefix_id;
DROP VIEW v_requests;
CREATE VIEW v_requests AS
SELECT q.request_id, q.request_key, q.server, q.framing, q.max_tokens, q.repeat,
       q.question_idx, q.dataset, b.body_sha256, b.request_json, q.response_id,
       q.question_sha256, q.body_id
FROM requests q
JOIN v_request_bodies b ON b.body_id = q.body_id;
DROP VIEW v_probe_requests;
CREATE VIEW v_probe_requests AS
SELECT q.probe_request_id, q.request_key, q.probe, q.step, q.server, q.framing, q.repeat,
       q.question_idx, q.dataset, b.body_sha256, b.request_json, q.response_id, q.body_id
FROM probe_requests q
JOIN v_request_bodies b ON b.body_id = q.body_id;
DROP VIEW v_responses;
CREATE VIEW v_responses AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.dataset,
       b.request_json,
       CASE WHEN r.spliced = 1
            THEN replace(replace(r.response_json, '{"$diffeval":"text"}', json_quote(r.text)),
                         '{"$diffeval":"reasoning"}', json_quote(r.reasoning))
            ELSE r.response_json END AS response_json,
       r.text, r.reasoning, r.finish_reason,
       r.stop_reason, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ttft_ms,
       r.status, r.error, r.error_kind, r.attempts, r.started_at, r.ok, r.streamed,
       r.token_gaps_ms,
       c.outcome, c.reasoning_started, r.response_id, q.request_id, q.request_key,
       r.stop_field, c.stop_cause
FROM requests q
JOIN responses r ON r.response_id = q.response_id
JOIN v_request_bodies b ON b.body_id = q.body_id
LEFT JOIN classifications c ON c.response_id = r.response_id;
)sql";

// Version 13: an answer imported from lm-eval samples was timed by nothing
// and records no finish state. responses.latency_ms may be NULL (docs/json.md:
// a value nothing measured is null, never 0); dropping its NOT NULL is a
// change to the table's stored definition alone (allow_null_latency). The
// imports stored before get NULL for the 0 they were given, and the outcome
// `unrecorded` for `other`, as their scoring now gives.
constexpr std::string_view k_latency_not_null = "latency_ms        REAL NOT NULL";
constexpr std::string_view k_latency_nullable = "latency_ms        REAL";
constexpr std::string_view k_schema_v13_imports = R"sql(
UPDATE responses AS r SET latency_ms = NULL WHERE latency_ms = 0 AND {unrecorded};
UPDATE classifications SET outcome = 'unrecorded', stop_cause = ''
    WHERE outcome = 'other' AND response_id IN
    (SELECT r.response_id FROM responses r WHERE {unrecorded});
)sql";

// Version 14: a chain whose second request has no reading (it failed after
// its retries, was not sent yet when a run was killed, or came back without
// log-probabilities) measured nothing. Version 8 gave such a reading the
// first request's smallest listed probability as an upper bound, but the
// whitespace that leads to the marker was listed, so P(open) can be far
// above it: one server's failed chain requests read as a shift of several
// logits against an identical server. p_open and bounded are NULL then, as
// for an engine that returned no log-probabilities. And a chain whose second
// request lists no marker bounds P(open) by the first request's floor (an
// unlisted marker-led token) plus the whitespace's probability times the
// second's floor, not by the first's floor alone: with " " at 0.99 and a
// floor of 1e-4, a second floor of 0.01 allows P(open) near 0.01.
constexpr std::string_view k_schema_v14 = R"sql(
DROP VIEW v_probes;
CREATE VIEW v_probes AS
SELECT q.probe, q.server, q.framing, q.repeat, q.question_idx, q.dataset,
       r.p_marker AS p_direct,
       r.p_whitespace,
       r2.p_marker AS p_after_whitespace,
       CASE WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
                 AND r2.marker_listed IS NULL THEN NULL
            WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1)
            THEN min(1.0, CASE WHEN r.marker_listed = 1 THEN r.p_marker ELSE 0 END +
                 CASE WHEN r.whitespace_listed = 1 AND r2.marker_listed = 1
                      THEN r.p_whitespace * r2.p_marker ELSE 0 END)
            WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
            THEN min(1.0, r.floor + r.p_whitespace * r2.floor)
            ELSE r.floor END AS p_open,
       CASE WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
                 AND r2.marker_listed IS NULL THEN NULL
            WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1)
            THEN 0 ELSE 1 END AS bounded,
       r.chosen, r.top_json, r2.top_json AS top_after_whitespace,
       r.response_id, r2.response_id AS response_id_after_whitespace
FROM probe_requests q
JOIN probe_responses r ON r.response_id = q.response_id AND r.ok = 1
LEFT JOIN probe_requests q2 ON q2.probe = q.probe AND q2.step = 1 AND q2.server = q.server
     AND q2.framing = q.framing AND q2.repeat = q.repeat AND q2.question_idx = q.question_idx
     AND q2.dataset = q.dataset
LEFT JOIN probe_responses r2 ON r2.response_id = q2.response_id AND r2.ok = 1
WHERE q.step = 0;
)sql";

// Version 15: a chain whose second request was read and lists no marker,
// while the first lists the marker directly, measured only its direct part:
// P(open) is that plus P(whitespace) times an unlisted marker's probability
// after it, at most the second reading's floor (0.0025 stored as measured
// where it could be 0.041). It is bounded by that sum now, as when neither
// path is listed. A response with no usable reading (no-logprobs) is no
// bound either: p_open and bounded are NULL, as for a chain not measured.
constexpr std::string_view k_schema_v15 = R"sql(
DROP VIEW v_probes;
CREATE VIEW v_probes AS
SELECT q.probe, q.server, q.framing, q.repeat, q.question_idx, q.dataset,
       r.p_marker AS p_direct,
       r.p_whitespace,
       r2.p_marker AS p_after_whitespace,
       CASE WHEN r.marker_listed IS NULL THEN NULL
            WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
                 AND r2.marker_listed IS NULL THEN NULL
            WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
                 AND r2.marker_listed = 0 AND r.marker_listed = 1
            THEN min(1.0, r.p_marker + r.p_whitespace * r2.floor)
            WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1)
            THEN min(1.0, CASE WHEN r.marker_listed = 1 THEN r.p_marker ELSE 0 END +
                 CASE WHEN r.whitespace_listed = 1 AND r2.marker_listed = 1
                      THEN r.p_whitespace * r2.p_marker ELSE 0 END)
            WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
            THEN min(1.0, r.floor + r.p_whitespace * r2.floor)
            ELSE r.floor END AS p_open,
       CASE WHEN r.marker_listed IS NULL THEN NULL
            WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
                 AND r2.marker_listed IS NULL THEN NULL
            WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1
                 AND r2.marker_listed = 0 THEN 1
            WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1)
            THEN 0 ELSE 1 END AS bounded,
       r.chosen, r.top_json, r2.top_json AS top_after_whitespace,
       r.response_id, r2.response_id AS response_id_after_whitespace
FROM probe_requests q
JOIN probe_responses r ON r.response_id = q.response_id AND r.ok = 1
LEFT JOIN probe_requests q2 ON q2.probe = q.probe AND q2.step = 1 AND q2.server = q.server
     AND q2.framing = q.framing AND q2.repeat = q.repeat AND q2.question_idx = q.question_idx
     AND q2.dataset = q.dataset
LEFT JOIN probe_responses r2 ON r2.response_id = q2.response_id AND r2.ok = 1
WHERE q.step = 0;
)sql";

// Version 16: a request's key has no index of its own. Its UNIQUE index was
// in hash order, so every read of a plan (one commit each) dirtied nearly
// every leaf of it, and the pages read back from the log grew with the
// plan (the official demo: 5.1-5.4 s with it, 4.3-4.5 s without). A key is
// the hash of its place (server, framing, token limit, repeat, question) and
// body, so one key has one place: the group index, in plan order, ends with the key and is
// UNIQUE, which keeps each key once as the key's index did
// (k_put_request's INSERT OR IGNORE) and serves every lookup of a key,
// which always comes with its place. SQLite cannot drop a column's UNIQUE:
// drop_key_indexes copies both tables first. And a probe request's
// responses are found through an index, as a measured request's are
// (responses_request): merge looks up each probe response it copies, and
// without one it read every stored probe response for each (the official
// demo's 35,613 took more than ten minutes).
constexpr std::string_view k_schema_v16 = R"sql(
CREATE UNIQUE INDEX requests_group ON requests
    (server, framing, max_tokens, repeat, question_idx, request_key);
CREATE UNIQUE INDEX probe_requests_group ON probe_requests
    (probe, server, framing, repeat, question_idx, request_key);
CREATE INDEX probe_responses_request ON probe_responses (probe_request_id);
)sql";

// Statements, indexed by Store::StatementId.
constexpr std::string_view k_statements[] = {
    // k_insert_run
    "INSERT INTO runs (started_at, dataset, config_json, diffeval_version) VALUES (?, ?, ?, ?)",
    // k_end_run: once; a run whose end is recorded keeps it
    "UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ? AND status = 'running'",
    // k_put_server: a run that learned nothing of the server (preflight
    // off: no model, info '{}') keeps what an earlier run stored, which
    // check_same_server compares later servers of the name with.
    "INSERT INTO servers (name, url, model, info_json) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET url = excluded.url, "
    "model = CASE WHEN excluded.model = '' THEN servers.model ELSE excluded.model END, "
    "info_json = CASE WHEN excluded.info_json = '{}' THEN servers.info_json "
    "ELSE excluded.info_json END",
    // k_put_server_log: a run that read no log (attached without
    // --server-log) keeps the log and facts an earlier run stored, the only
    // record of what that server ran when it answered; without facts either
    // (no /props) it changes nothing
    "UPDATE servers SET "
    "log_path = CASE WHEN ?2 = '' AND ?3 IS NULL THEN log_path ELSE ?1 END, log_text = ?2, "
    "facts_json = CASE WHEN ?2 = '' AND ?3 IS NULL THEN facts_json ELSE ?3 END "
    "WHERE name = ?4 AND NOT (?2 = '' AND coalesce(log_text, '') != '')",
    // k_put_question
    "INSERT OR IGNORE INTO questions (dataset, question_idx, question, answer, question_sha256) "
    "VALUES (?, ?, ?, ?, ?)",
    // k_question_indices
    "SELECT question_idx, question, answer FROM questions WHERE dataset = ?",
    // k_question_at
    "SELECT question, answer FROM questions WHERE dataset = ? AND question_idx = ?",
    // k_put_body, for a body k_body_id did not find: `request_json` is the
    // part after prefix `prefix_id` (NULL: the whole body)
    "INSERT INTO request_bodies (body_sha256, request_json, prefix_id) VALUES (?, ?, ?)",
    // k_body_id
    "SELECT body_id FROM request_bodies WHERE body_sha256 = ?",
    // k_put_request
    "INSERT OR IGNORE INTO requests (request_key, server, framing, max_tokens, repeat, "
    "question_idx, dataset, body_id, question_sha256) VALUES (?1, ?2, ?3, ?4, "
    "?5, ?6, ?7, ?8, "
    "(SELECT question_sha256 FROM questions WHERE dataset = ?7 AND question_idx = ?6))",
    // k_completed_keys
    "SELECT q.request_key FROM requests q JOIN responses r ON r.response_id = q.response_id "
    "WHERE r.ok = 1 UNION ALL SELECT q.request_key FROM probe_requests q JOIN probe_responses r "
    "ON r.response_id = q.response_id WHERE r.ok = 1",
    // k_existing: a stored request's id and whether its response succeeded,
    // through the group index (which ends with the key), which a plan read
    // in order walks sequentially
    "SELECT q.request_id, r.ok FROM requests q INDEXED BY requests_group LEFT JOIN responses r "
    "ON r.response_id = q.response_id WHERE q.server = ?2 AND q.framing = ?3 AND "
    "q.max_tokens = ?4 AND q.repeat = ?5 AND q.question_idx = ?6 AND q.request_key = ?1",
    // k_slot_taken: another request in a new request's place (server,
    // framing, token limit, repeat, question), with its body
    "SELECT dataset, body_id FROM requests INDEXED BY requests_group WHERE server = ?1 AND "
    "framing = ?2 AND max_tokens = ?3 AND repeat = ?4 AND question_idx = ?5 AND request_id <> ?6 "
    "LIMIT 1",
    // k_group_stored: another request of a new request's server, framing
    // and token limit
    "SELECT 1 FROM requests INDEXED BY requests_group WHERE server = ?1 AND framing = ?2 AND "
    "max_tokens = ?3 AND request_id <> ?4 LIMIT 1",
    // k_group_places: a group's stored places in the index's order (repeat,
    // then question), each with its request's key
    "SELECT question_idx, repeat, request_key, dataset, ifnull(question_sha256, '') FROM requests "
    "INDEXED BY requests_group WHERE server = ?1 AND framing = ?2 AND max_tokens = ?3 "
    "ORDER BY repeat, question_idx",
    // k_probe_places: as k_group_places, for a probe's requests
    "SELECT question_idx, repeat, step, request_key FROM probe_requests INDEXED BY "
    "probe_requests_group WHERE probe = ?1 AND server = ?2 AND framing = ?3 "
    "ORDER BY repeat, question_idx",
    // k_other_dataset
    "SELECT 1 FROM runs WHERE dataset <> ? LIMIT 1",
    // k_existing_probe: as k_existing
    "SELECT q.probe_request_id, r.ok FROM probe_requests q INDEXED BY probe_requests_group "
    "LEFT JOIN probe_responses r ON r.response_id = q.response_id WHERE q.probe = ?2 AND "
    "q.server = ?3 AND q.framing = ?4 AND q.repeat = ?5 AND q.question_idx = ?6 AND "
    "q.request_key = ?1",
    // k_request_id: for a response row without its request's id. The key
    // has no index of its own (k_schema_v16), so this reads the table: every
    // writer of many rows gives the ids (a run's planner, an import's
    // put_requests).
    "SELECT request_id FROM requests WHERE request_key = ?",
    // k_insert_response: one row of values, not INSERT ... SELECT, which
    // SQLite runs with a statement journal (a copy of each page it touches)
    "INSERT INTO responses (request_id, run_id, ok, status, response_json, text, reasoning, "
    "finish_reason, stop_reason, prompt_tokens, completion_tokens, attempts, latency_ms, ttft_ms, "
    "streamed, token_gaps_ms, started_at, error, error_kind, stop_field, notes, redacted, "
    "spliced) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    // k_point_request: the response that counts is the newest success, else
    // the newest failure; a failure never replaces a success.
    "UPDATE requests SET response_id = last_insert_rowid() WHERE request_id = ? AND "
    "(? = 1 OR response_id IS NULL OR NOT EXISTS (SELECT 1 FROM responses x "
    "WHERE x.response_id = requests.response_id AND x.ok = 1))",
    // k_put_probe_request
    "INSERT OR IGNORE INTO probe_requests (request_key, probe, step, server, framing, repeat, "
    "question_idx, dataset, body_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    // k_probe_request_id: as k_request_id
    "SELECT probe_request_id FROM probe_requests WHERE request_key = ?",
    // k_insert_probe_response: as k_insert_response
    "INSERT INTO probe_responses (probe_request_id, run_id, ok, status, response_json, attempts, "
    "latency_ms, started_at, error, error_kind, chosen, top_json, p_marker, marker_listed, "
    "p_whitespace, whitespace_listed, floor, spliced) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    // k_point_probe_request: as k_point_request
    "UPDATE probe_requests SET response_id = last_insert_rowid() WHERE probe_request_id = ? AND "
    "(? = 1 OR response_id IS NULL OR NOT EXISTS (SELECT 1 FROM probe_responses x "
    "WHERE x.response_id = probe_requests.response_id AND x.ok = 1))",
    // k_mark_killed: only called while holding the run lock, so no process
    // is writing any run still marked running.
    "UPDATE runs SET status = 'killed', finished_at = ? WHERE status = 'running'",
    // k_put_classification, k_put_score: as the scoring stage writes them
    k_upsert_classification,
    k_upsert_score,
    // k_put_prefix
    "INSERT OR IGNORE INTO body_prefixes (prefix_sha256, text) VALUES (?, ?)",
    // k_prefix_id
    "SELECT prefix_id FROM body_prefixes WHERE prefix_sha256 = ?",
};
static_assert(std::size(k_statements) == 30);

class Transaction {
public:
    explicit Transaction(Database& db) : m_db(db) { m_ok = m_db.exec("BEGIN IMMEDIATE").ok(); }
    ~Transaction() {
        if (m_ok && !m_committed) {
            (void)m_db.exec("ROLLBACK");
        }
    }
    bool begun() const { return m_ok; }
    util::Result<void> commit() {
        auto r = m_db.exec("COMMIT");
        m_committed = r.ok();
        return r;
    }

private:
    Database& m_db;
    bool m_ok = false;
    bool m_committed = false;
};

// The files SQLite and the run lock keep beside a database, by suffix.
constexpr std::array<std::string_view, 4> k_side_suffixes = {"-wal", "-shm", "-journal", ".lock"};

// Why an SQLite file at rest is cut short, or nothing. SQLite reads the
// pages missing past a cut within the last page as zeros: rows with NULL
// columns, read (and merged) without an error. A file is whole pages, at
// least as many as its header counts when that count is current (its
// change counter matches the count's). Only without a log beside it (an
// artifact copied in part, a download cut off): a run writing the file
// extends it a page at a time, and a checkpoint writes page 1, with the new
// count, before the pages it counts.
std::optional<std::string> cut_short(const std::string& path) {
    std::error_code ec;
    const auto wal = std::filesystem::file_size(path + "-wal", ec);
    if (!ec && wal > 0) {
        return std::nullopt;
    }
    const auto size = std::filesystem::file_size(path, ec);
    std::ifstream in(path, std::ios::binary);
    unsigned char h[100] = {};
    if (ec || size < sizeof h || !in.read(reinterpret_cast<char*>(h), sizeof h) ||
        std::memcmp(h, "SQLite format 3", 16) != 0) {
        return std::nullopt; // not SQLite: said where it is opened
    }
    const auto be32 = [&h](size_t at) {
        return (uint32_t{h[at]} << 24) | (uint32_t{h[at + 1]} << 16) | (uint32_t{h[at + 2]} << 8) |
               uint32_t{h[at + 3]};
    };
    const uint32_t raw = (uint32_t{h[16]} << 8) | h[17];
    const uint64_t page = raw == 1 ? 65536 : raw;
    if (page < 512 || (page & (page - 1)) != 0) {
        return std::nullopt; // SQLite says what is wrong with such a header
    }
    if (size % page != 0) {
        return fmt::format("{} (cut short: {} bytes, not a whole number of its {}-byte pages; "
                           "copied or downloaded in part?)",
                           k_damaged, size, page);
    }
    const uint64_t counted = be32(28);
    if (be32(24) == be32(92) && counted * page > size) {
        return fmt::format("{} (cut short: {} bytes, where its header counts {} pages of {} "
                           "bytes; copied or downloaded in part?)",
                           k_damaged, size, counted, page);
    }
    return std::nullopt;
}

} // namespace

bool is_sqlite_file(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        return false; // a pipe would block the read below
    }
    std::ifstream in(path, std::ios::binary);
    char head[16] = {};
    return in.read(head, sizeof head) &&
           std::string_view(head, sizeof head) == std::string_view("SQLite format 3\0", 16);
}

namespace {

// The database whose side file `path` names, with the side's suffix.
std::optional<std::pair<std::string, std::string_view>> side_file_of(const std::string& path) {
    for (const auto side : k_side_suffixes) {
        if (path.size() <= side.size() || !std::string_view(path).ends_with(side)) {
            continue;
        }
        std::string db = path.substr(0, path.size() - side.size());
        if (is_sqlite_file(db)) {
            return std::pair{std::move(db), side};
        }
    }
    return std::nullopt;
}

// side_file_of `path`, or of a file a symbolic link there names: SQLite
// writes a database through its path's links, so one named lnwal.sqlite and
// linked to o.sqlite-wal was written as o.sqlite's log and deleted when
// o.sqlite was next opened (an audit). Each link is read as written, not
// resolved: a -wal is there only while its database is open, and a link to
// one that is not there yet names it all the same (the next audit).
std::optional<std::pair<std::string, std::string_view>>
side_file_through_links(const std::string& path) {
    std::filesystem::path at(path);
    for (int hops = 0; hops < 40; ++hops) { // Linux's own limit on a chain of links
        if (auto side = side_file_of(at.string())) {
            return side;
        }
        std::error_code ec;
        if (!std::filesystem::is_symlink(at, ec)) {
            return std::nullopt;
        }
        const auto target = std::filesystem::read_symlink(at, ec);
        if (ec) {
            return std::nullopt;
        }
        at = target.is_absolute() ? target : (at.parent_path() / target).lexically_normal();
    }
    return std::nullopt;
}

} // namespace

std::optional<std::string> database_of_side_file(const std::string& path) {
    auto side = side_file_through_links(path);
    return side ? std::optional<std::string>(std::move(side->first)) : std::nullopt;
}

namespace {

// The directory SQLite makes a database's -wal and -shm files in.
std::filesystem::path directory_of(const std::string& db) {
    auto dir = std::filesystem::path(db).parent_path();
    return dir.empty() ? std::filesystem::path(".") : dir;
}

// The one line for a database that cannot be written for its directory
// `dir` (`why` not), which `existed` or not before.
util::Error unwritable_directory(const std::string& db, const std::filesystem::path& dir,
                                 std::string_view why, bool existed) {
    return make_error(ErrorKind::usage,
                      fmt::format("cannot open {} for writing: its directory {} is not writable "
                                  "({}), and SQLite keeps its -wal and -shm files beside it; {}: "
                                  "move the database to a directory you can write",
                                  db, dir.string(), why,
                                  existed ? "the file was left as it is" : "nothing was written"));
}

} // namespace

util::Result<void> check_db_file(const std::string& path, Store::Mode mode) {
    if (path.empty()) {
        return make_error(ErrorKind::usage,
                          "the database path is empty; give the path of a database file");
    }
    // SQLite would take the file for the database's own: a new database
    // written as r.sqlite-wal is thrown away the next time r.sqlite is
    // opened, and an old one there is read as no database.
    if (auto side = side_file_through_links(path)) {
        return make_error(ErrorKind::usage,
                          fmt::format("{} is the {} file of the database {}{}, not a database; "
                                      "give the database's own path, or another name",
                                      path, side->second, side->first,
                                      std::string_view(path).ends_with(side->second)
                                          ? ""
                                          : " (through a symbolic link)"));
    }
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    // SQLite makes its -wal and -shm files (and diffeval its lock) beside
    // the database. A directory nobody may write (chmod a-w) is read-only
    // on purpose: refused as root too, whom SQLite would let write there.
    // (One this user alone may not write is SQLite's to refuse: -wal and
    // -shm files that are there already may be all it needs.)
    const auto in_readonly_dir = [&]() -> util::Result<void> {
        const auto dir = directory_of(path);
        if (mode == Store::Mode::read_write && std::filesystem::is_directory(dir, ec) &&
            util::nobody_may_write(dir.string())) {
            return unwritable_directory(path, dir, "no write permission for anyone",
                                        std::filesystem::exists(st));
        }
        return {};
    };
    if (!std::filesystem::exists(st)) {
        return in_readonly_dir();
    }
    if (std::filesystem::is_directory(st)) {
        return make_error(ErrorKind::data,
                          fmt::format("{} is a directory, not a database file; give the path of "
                                      "a database file",
                                      path));
    }
    if (!std::filesystem::is_regular_file(st)) {
        return make_error(
            ErrorKind::data,
            fmt::format("{} is not a regular file; give the path of a database file", path));
    }
    if (access(path.c_str(), R_OK) != 0) {
        return make_error(ErrorKind::data, fmt::format("cannot read {}: {}; check its permissions",
                                                       path, std::strerror(errno)));
    }
    if (auto cut = cut_short(path)) {
        return make_error(ErrorKind::data, fmt::format("{}: {}", path, *cut));
    }
    // A log is read before SQLite folds it into the file (wal_fit.hpp),
    // unless another diffeval is writing it: then it is that process's (its
    // lock is asked only of a log that would be refused).
    if (auto why = log_that_does_not_fit(path); why && !RunLock::holder(path)) {
        return make_error(ErrorKind::data, *why);
    }
    // Under another name a second run would take another lock and write
    // the same file at once (the lock goes by the name, a link resolved).
    if (struct stat links{}; mode == Store::Mode::read_write && ::stat(path.c_str(), &links) == 0 &&
                             links.st_nlink > 1) {
        return make_error(ErrorKind::usage,
                          fmt::format("{} has {} names (hard links), and a run writing it through "
                                      "another name would not see this one's lock; keep one name "
                                      "(remove the other links) and run again",
                                      path, links.st_nlink));
    }
    if (std::string why; mode == Store::Mode::read_write && !util::may_write(path, &why)) {
        return make_error(ErrorKind::data,
                          fmt::format("cannot write {}: {}; diffeval stores scores and responses "
                                      "in it, so it must be writable",
                                      path, why));
    }
    // SQLite's log and shared-memory files, left by a process of another
    // user that read the database: writing it needs them writable too.
    for (const char* suffix : {"-wal", "-shm"}) {
        const auto side = path + suffix;
        if (mode == Store::Mode::read_write && access(side.c_str(), F_OK) == 0 &&
            access(side.c_str(), W_OK) != 0) {
            return make_error(ErrorKind::data,
                              fmt::format("cannot write {}: {} (another user's diffeval opened "
                                          "the database and left it); run as that user, or "
                                          "remove {}-wal and {}-shm when nothing has it open",
                                          side, std::strerror(errno), path, path));
        }
    }
    return in_readonly_dir();
}

util::Result<void> check_pages(const std::string& db) {
    // What is no database, or one cut short, or a log that is not its own,
    // is said as it is said everywhere (check_db_file); a file SQLite
    // cannot open or read as a database is said where it is opened.
    if (auto r = check_db_file(db, Store::Mode::read_only); !r) {
        return r;
    }
    return check_pages_of_checked_file(db);
}

util::Result<void> check_pages_of_checked_file(const std::string& db) {
    Database conn;
    if (!conn.open(db, Database::Create::read_only)) {
        return {};
    }
    Statement check(conn.handle(), "PRAGMA quick_check(1)");
    if (!check.valid() || !check.step()) {
        if (is_damaged(check.error())) {
            return make_error(ErrorKind::io, fmt::format("cannot check {}: {}", db, check.error()));
        }
        return {};
    }
    if (const auto said = check.column_text(0); said != "ok") {
        return make_error(
            ErrorKind::data,
            fmt::format(
                "{} is damaged (SQLite's quick_check: {}): its numbers cannot be "
                "trusted; restore it from a copy (sqlite3's .recover may save what is left)",
                db, util::one_line(said, 200)));
    }
    return {};
}

std::string now_iso8601() {
    // The calendar from <chrono> rather than gmtime_r and strftime, and the
    // digits written by hand rather than by fmt::format: every request is
    // stamped on the event loop's thread, and those took a microsecond of
    // its CPU, then 2% of the loop's time in the official demo.
    using namespace std::chrono;
    const auto now = floor<milliseconds>(system_clock::now());
    const auto day = floor<days>(now);
    const year_month_day ymd{day};
    const hh_mm_ss hms{now - day};
    char text[] = "0000-00-00T00:00:00.000Z";
    const auto put = [&text](size_t at, size_t width, long long value) {
        for (size_t i = at + width; i > at; --i) {
            text[i - 1] = static_cast<char>('0' + value % 10);
            value /= 10;
        }
    };
    put(0, 4, static_cast<int>(ymd.year()));
    put(5, 2, static_cast<unsigned>(ymd.month()));
    put(8, 2, static_cast<unsigned>(ymd.day()));
    put(11, 2, hms.hours().count());
    put(14, 2, hms.minutes().count());
    put(17, 2, hms.seconds().count());
    put(20, 3, hms.subseconds().count());
    return std::string(text, sizeof text - 1);
}

util::Result<std::unique_ptr<Store>> Store::open(const std::string& path, Mode mode) {
    // A --db that cannot be a database is the user's to fix (exit 2), found
    // before SQLite tries and fails with a less helpful message.
    std::error_code ec;
    const bool existed = std::filesystem::exists(path, ec);
    if (auto r = check_db_file(path, mode); !r) {
        return r.error();
    }
    // A symbolic link to nowhere was there before: it stays.
    const bool link_or_file = std::filesystem::exists(std::filesystem::symlink_status(path, ec));
    auto opened = open_at(path, mode, existed);
    if (!opened && !link_or_file && mode == Mode::read_write && is_disk_full(opened.error())) {
        // A file this call created and could not finish (the disk filled
        // while the schema was written: a 16 KiB file with no table) holds
        // nothing: it goes, so the next command starts afresh. Only then:
        // a command that does not take the run lock (import) may have lost
        // a race to create the file to another, whose file this would be.
        remove_with_sidecars(path);
    }
    return opened;
}

util::Result<std::unique_ptr<Store>> Store::open_at(const std::string& path, Mode mode,
                                                    bool existed) {
    std::unique_ptr<Store> s(new Store());
    s->m_path = path;
    auto create = mode == Mode::read_write ? Database::Create::yes : Database::Create::read_only;
    if (auto r = s->m_db.open(path, create); !r) {
        return make_error(existed ? ErrorKind::data : ErrorKind::usage, r.error().message);
    }
    // A new file's page size, set before its first read: that read sizes
    // the page cache for the default 4 KiB pages, and the 2 MiB cache then
    // held 4 KiB's number of 16 KiB pages (a 100,000-request run's peak RSS
    // grew by 8 MiB). It writes nothing, and an existing file keeps its own.
    if (mode == Mode::read_write && !s->m_db.exec("PRAGMA page_size=16384")) {
        return make_error(ErrorKind::data,
                          fmt::format("{} is not a diffeval database; give the .sqlite file "
                                      "'diffeval run' wrote",
                                      path));
    }
    // Whose file it is, read before anything is written: setting WAL mode
    // below rewrites the header of a file that is not diffeval's.
    if (auto r = s->identify(); !r) {
        return r.error();
    }
    // A new file gets 16 KiB pages: a request body or a response of a few
    // KiB then shares its page instead of leaving most of a 4 KiB page
    // empty. An existing file keeps its page size (WAL mode cannot change
    // it). Setting the journal mode writes the file's header, so a
    // read-only connection leaves it as the writer set it (WAL).
    // Temporary storage stays in memory. A statement that may stop halfway
    // through changing rows (INSERT ... SELECT, REPLACE, with foreign keys
    // checked) keeps a statement journal, a copy of every page it touches,
    // and SQLite spills one over 64 KiB (four 16 KiB pages) to a temporary
    // file: 7 of every 8 pwrite calls of a run, before the hot statements
    // were written to need none (k_insert_response, scoring's upserts).
    const char* pragmas = mode == Mode::read_write
                              ? "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; "
                                "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
                                "PRAGMA temp_store=MEMORY;"
                              : "PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY; "
                                "PRAGMA schema_version;";
    auto set = s->m_db.exec(pragmas);
    // Switching a file that is not in WAL mode yet (an old one, or one that
    // another tool rewrote) needs it alone: while a second command
    // migrates it, SQLite answers "database is locked" at once instead of
    // waiting, as waiting while holding a read lock could deadlock. Each
    // try lets go of the file; the other command's commit ends the wait.
    for (int tries = 0;
         !set && (sqlite3_errcode(s->m_db.handle()) & 0xff) == SQLITE_BUSY && tries < 1000;
         ++tries) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        set = s->m_db.exec(pragmas);
    }
    if (!set) {
        // Switching a new file to WAL writes its first page: the disk may
        // be full.
        if (is_disk_full(set.error())) {
            return set.error();
        }
        if ((sqlite3_errcode(s->m_db.handle()) & 0xff) == SQLITE_BUSY) {
            return make_error(ErrorKind::io,
                              fmt::format("{} stayed locked by another process for 10 s; the "
                                          "file was left as it is: run again when that "
                                          "process has finished",
                                          path));
        }
        // A file that is not SQLite at all (a JSON file given as --db) is
        // bad input, not a failure of the machine.
        return make_error(ErrorKind::data,
                          fmt::format("{} is not a diffeval database ({}); give the .sqlite file "
                                      "'diffeval run' wrote",
                                      path, set.error().message));
    }
    if (auto r = s->migrate(mode); !r) {
        return r.error();
    }
    if (auto r = s->prepare(); !r) {
        return r.error();
    }
    return s;
}

bool Store::holds_no_schema(const std::string& path) {
    Database db;
    if (!db.open(path, Database::Create::read_only)) {
        return false;
    }
    Statement v(db.handle(), "SELECT (SELECT user_version FROM pragma_user_version), "
                             "(SELECT count(*) FROM sqlite_master)");
    return v.valid() && v.step() && v.column_int(0) == 0 && v.column_int(1) == 0;
}

util::Result<void> Store::identify() {
    const auto not_ours = [&](const std::string& why) {
        return make_error(ErrorKind::data,
                          fmt::format("{} is not a diffeval database ({}); the file was left as "
                                      "it is: give the .sqlite file 'diffeval run' wrote, or "
                                      "choose another database file",
                                      m_path, why));
    };
    // A damaged file says so in SQLite's words, which the CLI turns into
    // what to do; a file that is not SQLite at all (a JSON file given as
    // --db) is not diffeval's. Both are bad input, not a failure of the
    // machine.
    const auto unreadable = [&](const std::string& why) {
        // Reading a database in WAL mode needs its shared-memory file,
        // which a full disk (or file-size limit) refuses: not the file's
        // fault.
        if (why == k_disk_full) {
            return make_error(ErrorKind::io, fmt::format("cannot read {}: {}", m_path, why));
        }
        // ... and so does a directory this user cannot write, where SQLite
        // cannot make that file: not the file's fault either.
        const int code = sqlite3_errcode(m_db.handle()) & 0xff;
        if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN) {
            const auto dir = directory_of(m_path);
            if (::access(dir.c_str(), W_OK) != 0) {
                return unwritable_directory(m_path, dir, std::strerror(errno), true);
            }
        }
        return code == SQLITE_CORRUPT
                   ? make_error(ErrorKind::data, fmt::format("cannot read {}: {}", m_path, why))
                   : not_ours(why);
    };
    Statement v(m_db.handle(), "SELECT user_version FROM pragma_user_version");
    if (!v.valid() || !v.step()) {
        return unreadable(v.error());
    }
    const int64_t version = v.column_int(0);
    std::vector<std::string> tables;
    Statement t(m_db.handle(), "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    while (t.valid() && t.step()) {
        tables.push_back(t.column_text(0));
    }
    if (!t.valid() || !t.error().empty()) {
        return unreadable(t.error());
    }
    if (version > k_schema_version) {
        return make_error(ErrorKind::data,
                          fmt::format("{} has schema version {}, newer than this diffeval ({}): "
                                      "a newer diffeval wrote it, or another program did; the "
                                      "file was left as it is: upgrade diffeval to read it, or "
                                      "choose another database file",
                                      m_path, version, k_schema_version));
    }
    // Versions 6 and 7 were never used: no diffeval wrote them.
    if (version < 0 || version == 6 || version == 7) {
        return not_ours(fmt::format("its schema version {} is one no diffeval writes", version));
    }
    // diffeval sets no application id; a file with one is another
    // program's (GeoPackage, MBTiles), tables or not.
    Statement app(m_db.handle(), "SELECT application_id FROM pragma_application_id");
    if (!app.valid() || !app.step()) {
        return unreadable(app.error());
    }
    Statement objects(m_db.handle(), "SELECT count(*) FROM sqlite_master");
    if (!objects.valid() || !objects.step()) {
        return unreadable(objects.error());
    }
    if (app.column_int(0) != 0 || (version == 0 && objects.column_int(0) > 0)) {
        return make_error(ErrorKind::data,
                          fmt::format("{} is a SQLite database but not diffeval's; choose "
                                      "another database file",
                                      m_path));
    }
    if (version == 0) {
        if (!tables.empty()) {
            return make_error(ErrorKind::data,
                              fmt::format("{} is a SQLite database but not diffeval's; choose "
                                          "another database file",
                                          m_path));
        }
        return {};
    }
    // Every schema since the first has these; another program's file with
    // a schema version of its own has not.
    for (const char* name :
         {"runs", "servers", "questions", "requests", "responses", "classifications", "scores"}) {
        if (std::find(tables.begin(), tables.end(), name) == tables.end()) {
            std::vector<std::string> shown(tables.begin(),
                                           tables.begin() + std::min<size_t>(tables.size(), 5));
            return not_ours(fmt::format(
                "schema version {}, but no table '{}'; its tables: {}{}", version, name,
                tables.empty() ? std::string("none") : fmt::format("{}", fmt::join(shown, ", ")),
                tables.size() > shown.size() ? ", ..." : ""));
        }
    }
    return {};
}

// The oldest schema a command that only reads takes as it is: version 16
// changed indexes alone (k_schema_v16), and every statement reads a version
// 15 file as it reads the current one. So a baseline kept read-only (a CI
// artifact) and merge's inputs, which merge never writes, are read after an
// upgrade without a `rescore` first.
constexpr int k_read_as_is = 15;

namespace {

// What SQLite said, without Database::exec's "database error: " before it.
std::string_view sqlite_words(std::string_view message) {
    constexpr std::string_view k_prefix = "database error: ";
    return message.starts_with(k_prefix) ? message.substr(k_prefix.size()) : message;
}

// A connection setting put back when a scope ends, however it ends.
struct SetOnExit {
    Database& db;
    const char* pragma;
    ~SetOnExit() { (void)db.exec(pragma); }
};

} // namespace

util::Result<void> Store::migrate(Mode mode) {
    Statement v(m_db.handle(), "PRAGMA user_version");
    if (!v.valid() || !v.step()) {
        // identify() read a new file before it was in WAL mode: reading it
        // now needs the shared-memory file, which a full disk refuses.
        if (v.error() == k_disk_full) {
            return make_error(ErrorKind::io, fmt::format("cannot read {}: {}", m_path, v.error()));
        }
        return make_error(ErrorKind::data, fmt::format("{} is not a SQLite database", m_path));
    }
    int from = static_cast<int>(v.column_int(0));
    v.reset();
    // identify() refused every version this diffeval cannot climb from.
    if (from == k_schema_version || (mode == Mode::read_only && from >= k_read_as_is)) {
        m_version = from;
        return {};
    }
    if (mode == Mode::read_only) {
        // Schema version 0 with no table: an empty file, which no command
        // that reads results can do anything with.
        return make_error(
            ErrorKind::data,
            from == 0 ? fmt::format("{} is empty: no diffeval results are stored in it", m_path)
                      : fmt::format("{} has schema version {}, which this diffeval reads only "
                                    "once migrated; migrate it with 'diffeval rescore --db {}' "
                                    "(a read-only file: on a writable copy), then run this "
                                    "command again",
                                    m_path, from, m_path));
    }
    // Version 16 copies the request tables, which responses refer to:
    // dropping the old ones with references checked would fail. A
    // transaction cannot change the setting, so it is off around the
    // migration's (the copies keep every id).
    if (auto r = m_db.exec("PRAGMA foreign_keys=OFF"); !r) {
        return r.error();
    }
    const SetOnExit check_again{m_db, "PRAGMA foreign_keys=ON"};
    Transaction tx(m_db);
    if (!tx.begun()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot lock {}: {}", m_path, m_db.last_error()));
    }
    // Read again under the write lock: another process (a second CI job's
    // command on the same file) may have migrated it while this one waited
    // for the lock, and climbing again from the version read above would
    // fail half-way ("table request_bodies already exists").
    if (!v.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read {}: {}", m_path, v.error()));
    }
    from = static_cast<int>(v.column_int(0));
    v.reset();
    if (from == k_schema_version) {
        m_version = from;
        return {}; // the transaction rolls back: it wrote nothing
    }
    if (from > k_schema_version) {
        return make_error(ErrorKind::data,
                          fmt::format("{} was migrated to schema version {} by a newer diffeval "
                                      "while this one opened it; the file was left as it is: "
                                      "upgrade diffeval to read it",
                                      m_path, from));
    }
    if (auto r = climb(from, k_schema_version); !r) {
        // A step that drops a column or renames a table makes SQLite read
        // every view and trigger: one of the user's that reads what a step
        // has dropped at that moment stops it ("error in view my_view: no
        // such table: main.v_scores"), and so does a trigger on a view that
        // climb made again and that reads what the ladder removed. The
        // transaction leaves the file as it was; the user decides about
        // their object.
        const std::string_view why = sqlite_words(r.error().message);
        if (why.find("error in view ") != std::string_view::npos ||
            why.find("error in trigger ") != std::string_view::npos) {
            return make_error(ErrorKind::data,
                              fmt::format("cannot migrate {} to schema version {}: {}: a view or "
                                          "trigger of your own reads what the migration changes; "
                                          "drop it, run again, then make it again on the new "
                                          "schema (docs/schema.md)",
                                          m_path, k_schema_version, util::one_line(why, 400)));
        }
        return r.error();
    }
    if (auto r = m_db.exec(fmt::format("PRAGMA user_version = {}", k_schema_version)); !r) {
        return r.error();
    }
    if (auto r = tx.commit(); !r) {
        return r.error();
    }
    m_version = k_schema_version;
    if (from >= 1 && from < 9) {
        // Give the space of the repeated request bodies back to the file
        // system. Outside the transaction, as VACUUM must be; a failure (no
        // room for the copy) leaves a correct, only larger, file.
        (void)m_db.exec("VACUUM");
    }
    return {};
}

namespace {

// The rows of `sql`'s first two columns, as text, into `out`; false when it
// could not be read.
bool read_pairs(sqlite3* db, const std::string& sql,
                std::vector<std::pair<std::string, std::string>>& out) {
    Statement st(db, sql);
    while (st.valid() && st.step()) {
        out.emplace_back(st.column_text(0), st.column_text(1));
    }
    return st.valid() && st.error().empty();
}

} // namespace

util::Result<void> Store::climb(int from, int to) {
    // The ladder: each rung takes the schema from an older version to its
    // own, with its SQL and, where a step needs C++ (a hash, a table's
    // stored definition), a member run before or after it. Versions 6 and 7
    // were never used on this line.
    using Step = util::Result<void> (Store::*)();
    struct Rung {
        int version;
        Step before;
        std::string_view sql;
        Step after;
    };
    const std::string v13 = fmt::format(fmt::runtime(k_schema_v13_imports),
                                        fmt::arg("unrecorded", k_finish_unrecorded));
    const Rung ladder[] = {
        {1, nullptr, k_schema_v1, nullptr},
        {2, nullptr, k_schema_v2, nullptr},
        {3, nullptr, k_schema_v3, &Store::backfill_question_hashes},
        {4, nullptr, k_schema_v4, nullptr},
        {5, nullptr, k_schema_v5, nullptr},
        {8, nullptr, k_schema_v8, nullptr},
        {9, nullptr, k_schema_v9, nullptr},
        {10, nullptr, k_schema_v10, nullptr},
        {11, nullptr, k_schema_v11, nullptr},
        {12, nullptr, k_schema_v12, nullptr},
        {13, &Store::allow_null_latency, v13, nullptr},
        {14, nullptr, k_schema_v14, nullptr},
        {15, nullptr, k_schema_v15, nullptr},
        {16, &Store::drop_key_indexes, k_schema_v16, nullptr},
    };
    // A user's triggers on the views (INSTEAD OF): a rung that changes a
    // view drops it and makes it anew, and its triggers go with it. Each is
    // made again from its stored text at the top of the ladder, where every
    // view it may name exists again.
    std::vector<std::pair<std::string, std::string>> on_views;
    if (!read_pairs(m_db.handle(),
                    "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name IN "
                    "(SELECT name FROM sqlite_schema WHERE type = 'view') ORDER BY rowid",
                    on_views)) {
        return make_error(ErrorKind::io, fmt::format("cannot migrate {}: cannot read its "
                                                     "triggers: {}",
                                                     m_path, m_db.last_error()));
    }
    for (const auto& rung : ladder) {
        if (from >= rung.version || to < rung.version) {
            continue;
        }
        if (rung.before) {
            if (auto r = (this->*rung.before)(); !r) {
                return r.error();
            }
        }
        if (auto r = m_db.exec(rung.sql); !r) {
            return r.error();
        }
        if (rung.after) {
            if (auto r = (this->*rung.after)(); !r) {
                return r.error();
            }
        }
    }
    if (on_views.empty()) {
        return {};
    }
    // SQLite reads a trigger's body only when it fires, or when a table is
    // renamed: a scratch table renamed makes it read every trigger and view.
    // One made again that reads a column the ladder removed would fire an
    // error, and fail every later ALTER TABLE on the file, a later
    // migration's among them. Checked only when everything read well before
    // (a user's own broken object is not this migration's to refuse).
    // Only the scratch table is dropped: a user's table of either name makes
    // the first check fail, and then nothing is checked.
    const auto schema_error = [&]() -> std::optional<std::string> {
        if (auto made = m_db.exec("CREATE TABLE diffeval_rename_check (x)"); !made) {
            return made.error().message;
        }
        auto renamed =
            m_db.exec("ALTER TABLE diffeval_rename_check RENAME TO diffeval_rename_checked");
        (void)m_db.exec(renamed ? "DROP TABLE diffeval_rename_checked"
                                : "DROP TABLE diffeval_rename_check");
        return renamed ? std::nullopt : std::optional(renamed.error().message);
    };
    const bool checkable = !schema_error();
    Statement kept(m_db.handle(),
                   "SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = ?1");
    for (const auto& [name, sql] : on_views) {
        const bool still_there = kept.valid() && kept.bind(name).step();
        kept.reset();
        if (still_there) {
            continue;
        }
        // Said as SQLite says a trigger that does not work, so that migrate
        // names it as it names one a step stopped on.
        if (auto made = m_db.exec(sql); !made) {
            return make_error(ErrorKind::io, fmt::format("error in trigger {}: {}", name,
                                                         sqlite_words(made.error().message)));
        }
        if (auto why = checkable ? schema_error() : std::nullopt) {
            return make_error(ErrorKind::io, std::string(sqlite_words(*why)));
        }
    }
    return {};
}

util::Result<void> Store::allow_null_latency() {
    // SQLite's documented procedure for dropping a NOT NULL constraint, which
    // changes nothing stored in the table (lang_altertable.html, "Making
    // Other Kinds Of Table Schema Changes"): inside the migration's
    // transaction, edit the table's definition in sqlite_schema and bump the
    // schema version, so every connection reads the new definition. Rebuilding
    // the table instead would copy every response, and the tables that refer
    // to it would have to be dropped and rebuilt with it.
    Statement version(m_db.handle(), "PRAGMA schema_version");
    if (!version.valid() || !version.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the schema version of {}: {}",
                                                     m_path, m_db.last_error()));
    }
    const int64_t schema_version = version.column_int(0);
    version.reset();
    if (auto r = m_db.exec("PRAGMA writable_schema = ON"); !r) {
        return r.error();
    }
    Statement edit(m_db.handle(), "UPDATE sqlite_schema SET sql = replace(sql, ?1, ?2) WHERE "
                                  "type = 'table' AND name = 'responses' AND instr(sql, ?1) > 0");
    const bool edited = edit.valid() && edit.bind(k_latency_not_null, k_latency_nullable).run() &&
                        sqlite3_changes(m_db.handle()) == 1;
    const auto why = m_db.last_error();
    edit = Statement();
    if (auto r = m_db.exec(fmt::format("PRAGMA schema_version = {}; PRAGMA writable_schema = OFF",
                                       schema_version + 1));
        !r) {
        return r.error();
    }
    if (!edited) {
        // SQLite's words for no error at all are "not an error".
        const bool said = !why.empty() && why != "not an error";
        return make_error(ErrorKind::data,
                          fmt::format("cannot migrate {}: its responses table does not declare "
                                      "'{}' as diffeval created it{}: the file was edited, or its "
                                      "schema version (PRAGMA user_version) lowered; use a copy "
                                      "from before",
                                      m_path, k_latency_not_null,
                                      said ? fmt::format(" ({})", why) : std::string()));
    }
    return {};
}

util::Result<void> Store::drop_key_indexes() {
    // SQLite's documented way to change what a table declares
    // (lang_altertable.html, "Making Other Kinds Of Table Schema Changes"):
    // a new table, declared as the stored one is but for the key's UNIQUE,
    // takes every row; the old one is dropped and the new one renamed, and
    // the table's other indexes and its triggers (a user's own) are made
    // again from their stored text. The rename is made the legacy way, which
    // leaves every view and every other trigger as it is: they name the
    // table, and the default way checks each of them and refuses the rename
    // while the table is missing (a user's trigger on `responses` that reads
    // `requests` stopped every command). References to the tables are not
    // checked meanwhile either (migrate turns them off): the rows keep their
    // ids.
    sqlite3* h = m_db.handle();
    if (auto r = m_db.exec("PRAGMA legacy_alter_table=ON"); !r) {
        return r.error();
    }
    const SetOnExit modern_again{m_db, "PRAGMA legacy_alter_table=OFF"};
    for (const std::string table : {"requests", "probe_requests"}) {
        std::vector<std::pair<std::string, std::string>> declared;
        std::vector<std::pair<std::string, std::string>> parts; // indexes, triggers
        if (!read_pairs(h,
                        fmt::format("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND "
                                    "name = '{}'",
                                    table),
                        declared) ||
            !read_pairs(
                h,
                fmt::format("SELECT name, sql FROM sqlite_schema WHERE type IN ('index', "
                            "'trigger') AND tbl_name = '{0}' AND sql IS NOT NULL AND name <> "
                            "'{0}_group' ORDER BY rowid",
                            table),
                parts)) {
            return make_error(ErrorKind::io, fmt::format("cannot migrate {}: cannot read table "
                                                         "{}: {}",
                                                         m_path, table, m_db.last_error()));
        }
        // The key's column as diffeval declared it: `request_key TEXT NOT
        // NULL UNIQUE,` (its spacing differs between the two tables).
        std::string sql = declared.empty() ? std::string() : declared[0].second;
        const auto key = sql.find("request_key ");
        const auto unique = sql.find(" UNIQUE", key);
        const auto open = sql.find('(');
        if (key == std::string::npos || open > key || unique == std::string::npos ||
            unique > sql.find(',', key)) {
            return make_error(ErrorKind::data,
                              fmt::format("cannot migrate {}: its {} table does not declare "
                                          "request_key UNIQUE as diffeval created it",
                                          m_path, table));
        }
        sql.erase(unique, std::string_view(" UNIQUE").size());
        const auto copy = table + "_v16";
        for (const auto& step : {
                 fmt::format("CREATE TABLE {} {}", copy, sql.substr(open)),
                 fmt::format("INSERT INTO {} SELECT * FROM {}", copy, table),
                 fmt::format("DROP TABLE {}", table),
                 fmt::format("ALTER TABLE {} RENAME TO {}", copy, table),
             }) {
            if (auto r = m_db.exec(step); !r) {
                return r.error();
            }
        }
        for (const auto& [name, part] : parts) {
            if (auto r = m_db.exec(part); !r) {
                return r.error();
            }
        }
    }
    return {};
}

util::Result<void> Store::create_at_version(const std::string& path, int version) {
    std::unique_ptr<Store> s(new Store());
    s->m_path = path;
    if (auto r = s->m_db.open(path, Database::Create::yes); !r) {
        return r.error();
    }
    Transaction tx(s->m_db);
    if (auto r = s->climb(0, version); !r) {
        return r.error();
    }
    if (auto r = s->m_db.exec(fmt::format("PRAGMA user_version = {}", version)); !r) {
        return r.error();
    }
    return tx.commit();
}

void remove_with_sidecars(const std::string& path) {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::filesystem::remove(path + suffix, ec);
    }
}

bool names_database(const std::string& path, const std::string& db) {
    if (db.empty()) {
        return false; // no database given (gate without --baseline-db)
    }
    const std::string file = util::resolved_path(path);
    const std::string base = util::resolved_path(db);
    if (file == base) {
        return true;
    }
    for (const auto side : k_side_suffixes) {
        if (file == base + std::string(side)) {
            return true;
        }
    }
    // Another name for the same file (a hard link).
    struct stat a {};
    struct stat b {};
    return ::stat(path.c_str(), &a) == 0 && ::stat(db.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

std::string request_key(std::string_view server, std::string_view framing, int max_tokens,
                        int repeat, int64_t question_idx, std::string_view body_sha256) {
    return util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}", server, framing, max_tokens,
                                        repeat, question_idx, body_sha256));
}

std::string question_hash(std::string_view question, std::string_view answer) {
    std::string content;
    content.reserve(question.size() + answer.size() + 1);
    content.append(question).append(1, '\0').append(answer);
    return util::sha256_hex(content);
}

util::Result<void> Store::backfill_question_hashes() {
    {
        Statement read(m_db.handle(),
                       "SELECT dataset, question_idx, question, answer FROM questions "
                       "WHERE question_sha256 IS NULL");
        Statement write(m_db.handle(), "UPDATE questions SET question_sha256 = ?1 WHERE dataset = "
                                       "?2 AND question_idx = ?3");
        while (read.step()) {
            if (!write
                     .bind(question_hash(read.column_view(2), read.column_view(3)),
                           read.column_text(0), read.column_int(1))
                     .run()) {
                return make_error(ErrorKind::io, fmt::format("cannot hash the questions of {}: {}",
                                                             m_path, m_db.last_error()));
            }
        }
        if (!read.error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read the questions of {}: {}",
                                                         m_path, read.error()));
        }
    }
    // Requests take their question's hash; a request whose question row is
    // missing keeps NULL and is paired by dataset and index as before.
    return m_db.exec("UPDATE requests SET question_sha256 = (SELECT q.question_sha256 FROM "
                     "questions q WHERE q.dataset = requests.dataset AND q.question_idx = "
                     "requests.question_idx) WHERE question_sha256 IS NULL");
}

util::Result<void> Store::prepare() {
    for (int i = 0; i < k_count_statements; ++i) {
        m_stmts[i] = Statement(m_db.handle(), k_statements[i]);
        if (!m_stmts[i].valid()) {
            return make_error(ErrorKind::internal, fmt::format("cannot prepare statement {}: {}", i,
                                                               m_stmts[i].error()));
        }
    }
    return {};
}

util::Result<int64_t> Store::begin_run(const std::string& config_json, const std::string& dataset) {
    if (!m_stmts[k_insert_run].bind(now_iso8601(), dataset, config_json, DIFFEVAL_VERSION).run()) {
        return make_error(ErrorKind::io, fmt::format("cannot record run: {}", m_db.last_error()));
    }
    return static_cast<int64_t>(sqlite3_last_insert_rowid(m_db.handle()));
}

util::Result<void> Store::end_run(int64_t run_id, const std::string& status) {
    if (!m_stmts[k_end_run].bind(now_iso8601(), status, run_id).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record run end: {}", m_db.last_error()));
    }
    return {};
}

bool Store::mark_run_failed(int64_t run_id) {
    if (end_run(run_id, "failed")) {
        return true;
    }
    // What the log holds was committed; pages the file already has take
    // it without growing, and the emptied log then has room for the row.
    (void)sqlite3_wal_checkpoint_v2(m_db.handle(), "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr,
                                    nullptr);
    return end_run(run_id, "failed").ok();
}

int64_t Store::run_responses(int64_t run_id) {
    Statement count(m_db.handle(), "SELECT (SELECT count(*) FROM responses WHERE run_id = ?1) + "
                                   "(SELECT count(*) FROM probe_responses WHERE run_id = ?1)");
    return count.valid() && count.bind(run_id).step() ? count.column_int(0) : 0;
}

bool Store::holds_no_responses() {
    Statement none(m_db.handle(), "SELECT NOT EXISTS (SELECT 1 FROM responses) AND NOT EXISTS "
                                  "(SELECT 1 FROM probe_responses)");
    return none.valid() && none.step() && none.column_int(0) == 1;
}

bool Store::forget_run(int64_t run_id) {
    std::lock_guard turn(m_turn);
    Transaction tx(m_db);
    Statement dataset(m_db.handle(), "SELECT dataset FROM runs WHERE run_id = ?");
    if (!tx.begun() || !dataset.valid() || !dataset.bind(run_id).step()) {
        return false;
    }
    const std::string name = dataset.column_text(0);
    dataset.reset();
    Statement forget(m_db.handle(),
                     "DELETE FROM runs WHERE run_id = ?1 AND NOT EXISTS (SELECT 1 FROM responses "
                     "WHERE run_id = ?1) AND NOT EXISTS (SELECT 1 FROM probe_responses WHERE "
                     "run_id = ?1)");
    if (!forget.valid() || !forget.bind(run_id).run() || sqlite3_changes(m_db.handle()) != 1) {
        return false;
    }
    // The questions the run stored first, when nothing else holds their
    // dataset: a run refused for another dataset file left them, and they
    // then refused a run of that file once it was corrected.
    Statement questions(m_db.handle(),
                        "DELETE FROM questions WHERE dataset = ?1 AND NOT EXISTS (SELECT 1 FROM "
                        "runs WHERE dataset = ?1) AND NOT EXISTS (SELECT 1 FROM requests WHERE "
                        "dataset = ?1) AND NOT EXISTS (SELECT 1 FROM probe_requests WHERE "
                        "dataset = ?1)");
    return questions.valid() && questions.bind(name).run() && tx.commit().ok();
}

util::Result<int64_t> Store::mark_stale_runs_killed() {
    if (!m_stmts[k_mark_killed].bind(now_iso8601()).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot mark earlier runs killed: {}", m_db.last_error()));
    }
    return static_cast<int64_t>(sqlite3_changes(m_db.handle()));
}

util::Result<void> Store::put_server(const ServerRow& s) {
    if (!m_stmts[k_put_server].bind(s.name, s.url, s.model, s.info_json).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record server: {}", m_db.last_error()));
    }
    return {};
}

util::Result<std::optional<ServerIdentity>> Store::answered_server(const std::string& name) {
    std::lock_guard turn(m_turn);
    Statement st(m_db.handle(),
                 "SELECT url, model, info_json, facts_json FROM servers WHERE name = ?1 AND "
                 "(EXISTS (SELECT 1 FROM requests WHERE server = ?1 AND response_id IS NOT NULL) "
                 "OR EXISTS (SELECT 1 FROM probe_requests WHERE server = ?1 AND "
                 "response_id IS NOT NULL))");
    if (!st.valid() || !st.bind(name).step()) {
        if (!st.valid() || !st.error().empty()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot read servers: {}", m_db.last_error()));
        }
        return std::optional<ServerIdentity>{};
    }
    return std::optional<ServerIdentity>{server_identity(st.column_view(0), st.column_text(1),
                                                         st.column_view(2), st.column_text(3))};
}

util::Result<void> Store::put_server_facts(const std::string& name, const std::string& facts_json) {
    Statement st(m_db.handle(), "UPDATE servers SET facts_json = ? WHERE name = ?");
    if (!st.bind(facts_json, name).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record server facts: {}", m_db.last_error()));
    }
    return {};
}

util::Result<bool> Store::put_server_log(const std::string& name, const std::string& log_path,
                                         const std::string& log_text,
                                         const std::string& facts_json) {
    auto facts =
        facts_json.empty() ? std::optional<std::string>{} : std::optional<std::string>{facts_json};
    if (!m_stmts[k_put_server_log].bind(log_path, log_text, facts, name).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record server log: {}", m_db.last_error()));
    }
    return sqlite3_changes(m_db.handle()) > 0;
}

util::Result<std::optional<Store::StoredQuestion>>
Store::put_questions(const std::string& dataset,
                     const std::vector<std::pair<std::string, std::string>>& qa) {
    // A resumed run finds its questions stored: hashing and inserting them
    // again (INSERT OR IGNORE keeps what is there) cost a few ms of its start.
    // A stored one that differs would leave the run's requests hashed and
    // scored as the stored question, which they did not ask.
    std::vector<bool> stored(qa.size(), false);
    std::optional<StoredQuestion> changed;
    auto& known = m_stmts[k_question_indices];
    known.bind(dataset);
    while (known.step()) {
        const auto i = known.column_int(0);
        if (i < 0 || static_cast<size_t>(i) >= qa.size()) {
            continue;
        }
        const auto& [question, answer] = qa[static_cast<size_t>(i)];
        stored[static_cast<size_t>(i)] = true;
        // Rows come by index (the primary key): the first that differs.
        if (known.column_view(1) != question || known.column_view(2) != answer) {
            changed = StoredQuestion{i, known.column_text(1), known.column_text(2)};
            break;
        }
    }
    if (!known.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read questions: {}", known.error()));
    }
    known.reset();
    if (changed) {
        return changed;
    }
    if (std::find(stored.begin(), stored.end(), false) == stored.end()) {
        return std::optional<StoredQuestion>{};
    }
    Transaction tx(m_db);
    for (size_t i = 0; i < qa.size(); ++i) {
        if (stored[i]) {
            continue;
        }
        if (!m_stmts[k_put_question]
                 .bind(dataset, static_cast<int64_t>(i), qa[i].first, qa[i].second,
                       question_hash(qa[i].first, qa[i].second))
                 .run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot store questions: {}", m_db.last_error()));
        }
    }
    if (auto r = tx.commit(); !r) {
        return r.error();
    }
    return std::optional<StoredQuestion>{};
}

std::string Store::request_body(const std::string& server, const std::string& framing,
                                int max_tokens, int repeat, int64_t question_idx,
                                const std::string& key) {
    Statement st(m_db.handle(),
                 "SELECT b.request_json FROM requests q INDEXED BY requests_group JOIN "
                 "v_request_bodies b ON b.body_id = q.body_id WHERE q.server = ? AND q.framing = ? "
                 "AND q.max_tokens = ? AND q.repeat = ? AND q.question_idx = ? AND "
                 "q.request_key = ?");
    return st.valid() && st.bind(server, framing, max_tokens, repeat, question_idx, key).step()
               ? st.column_text(0)
               : std::string();
}

util::Result<std::optional<Store::StoredQuestion>>
Store::stored_question(const std::string& dataset, int64_t question_idx) {
    auto& st = m_stmts[k_question_at];
    std::optional<StoredQuestion> out;
    if (st.bind(dataset, question_idx).step()) {
        out = StoredQuestion{question_idx, st.column_text(0), st.column_text(1)};
    }
    const auto error = st.error();
    st.reset();
    if (!error.empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read questions: {}", error));
    }
    return out;
}

util::Result<void> Store::check_references(bool on) {
    std::lock_guard turn(m_turn);
    return m_db.exec(on ? "PRAGMA foreign_keys=ON" : "PRAGMA foreign_keys=OFF");
}

util::Result<std::vector<Store::Planned>> Store::put_requests(const std::vector<RequestRow>& rows) {
    std::lock_guard turn(m_turn);
    Transaction tx(m_db);
    m_recent_prefixes.clear();
    std::vector<Planned> planned(rows.size());
    if (auto r = insert_requests(rows, planned, Places::kept); !r) {
        return r.error();
    }
    if (auto r = tx.commit(); !r) {
        return r.error();
    }
    return planned;
}

util::Result<void> Store::insert_requests(const std::vector<RequestRow>& rows,
                                          std::vector<Planned>& planned, Places places) {
    auto& st = m_stmts[k_put_request];
    auto& probe = m_stmts[k_put_probe_request];
    auto* db = m_db.handle();
    // Rows of one body come together and the first carries it (the others
    // may leave `body` empty); a known body is kept as it is.
    const RequestRow* leader = nullptr;
    std::optional<int64_t> body_id;
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        if (!leader || leader->body_sha256 != r.body_sha256) {
            leader = &r;
            body_id.reset();
        }
        if (!body_id) {
            auto id = put_body(r.body_sha256, leader->body, leader->prefix_bytes);
            if (!id) {
                return id.error();
            }
            body_id = *id;
        }
        const bool is_probe = r.probe_step >= 0;
        const bool ran = is_probe ? probe
                                        .bind(r.key, r.probe, r.probe_step, r.server, r.framing,
                                              r.repeat, r.question_idx, r.dataset, *body_id)
                                        .run()
                                  : st.bind(r.key, r.server, r.framing, r.max_tokens, r.repeat,
                                            r.question_idx, r.dataset, *body_id)
                                        .run();
        if (!ran) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot store {}requests: {}", is_probe ? "probe " : "",
                                          (is_probe ? probe : st).error()));
        }
        if (sqlite3_changes(db) == 1) {
            const auto id = sqlite3_last_insert_rowid(db);
            if (!is_probe && places == Places::checked) {
                if (auto taken = check_slot(r, leader->body, id); !taken) {
                    return taken;
                }
            }
            planned[i] = Planned{false, id};
            continue;
        }
        // Planned before: its id, and whether it was answered.
        auto& ex = m_stmts[is_probe ? k_existing_probe : k_existing];
        const bool found =
            is_probe ? ex.bind(r.key, r.probe, r.server, r.framing, r.repeat, r.question_idx).step()
                     : ex.bind(r.key, r.server, r.framing, r.max_tokens, r.repeat, r.question_idx)
                           .step();
        if (!found) {
            return make_error(
                ErrorKind::io,
                fmt::format("cannot read requests: {}",
                            ex.error().empty() ? "a stored key is missing" : ex.error()));
        }
        planned[i] = Planned{ex.column_int(1) == 1, ex.column_int(0)};
        ex.reset();
    }
    return {};
}

// A request new to the database must not take the place of another: the
// same server, framing, token limit, repeat and question with another body
// (a changed framing file, sampling setting, model or dataset) would count
// the question twice in its group.
util::Result<void> Store::check_slot(const RequestRow& r, const std::string& body, int64_t id) {
    // A group new to the database (a fresh run's every group) has no place
    // to take: one lookup for it, not one a request.
    auto seen = std::find_if(m_groups_seen.begin(), m_groups_seen.end(), [&](const auto& g) {
        return g.max_tokens == r.max_tokens && g.server == r.server && g.framing == r.framing;
    });
    if (seen == m_groups_seen.end()) {
        auto& stored = m_stmts[k_group_stored];
        const bool before = stored.bind(r.server, r.framing, r.max_tokens, id).step();
        if (!stored.error().empty()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot read requests: {}", stored.error()));
        }
        stored.reset();
        seen =
            m_groups_seen.insert(m_groups_seen.end(), {r.server, r.framing, r.max_tokens, before});
    }
    if (!seen->stored_before) {
        return {};
    }
    auto& taken = m_stmts[k_slot_taken];
    if (!taken.bind(r.server, r.framing, r.max_tokens, r.repeat, r.question_idx, id).step()) {
        if (!taken.error().empty()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot read requests: {}", taken.error()));
        }
        taken.reset();
        return {};
    }
    const auto dataset = taken.column_text(0);
    const auto body_id = taken.column_int(1);
    taken.reset();
    // What changed, named as merge names it: `"stream": true` is none of
    // "the framing, a sampling setting, the model or the question".
    Statement stored(m_db.handle(), fmt::format("SELECT request_json FROM ({}) WHERE body_id = ?",
                                                k_request_bodies_select));
    const std::string what = what_changed(
        stored.valid() && stored.bind(body_id).step() ? stored.column_view(0) : "", body);
    return make_error(
        ErrorKind::usage,
        fmt::format("{}/{}/{} already holds question {} (repeat {}) sent with another request "
                    "body{}: {}; run this configuration under another --server name or into "
                    "another --db",
                    r.server, r.framing, r.max_tokens, r.question_idx, r.repeat,
                    dataset == r.dataset ? "" : fmt::format(" (dataset {})", dataset), what));
}

util::Result<int64_t> Store::put_prefix(std::string_view text) {
    for (const auto& [prefix, id] : m_recent_prefixes) {
        if (prefix == text) {
            return id;
        }
    }
    const std::string sha256 = util::sha256_hex(text);
    if (!m_stmts[k_put_prefix].bind(sha256, text).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot store requests: {}", m_stmts[k_put_prefix].error()));
    }
    auto id = row_id(k_prefix_id, sha256);
    if (!id) {
        return id.error();
    }
    if (!*id) {
        return make_error(ErrorKind::io, "cannot store requests: a stored body prefix is missing");
    }
    // Sixteen: every built-in framing's measured bodies and the probe's up
    // to two steps each fit; the oldest goes first. Comparing a body's
    // prefix with them costs little next to hashing and looking it up.
    constexpr size_t k_recent_prefixes = 16;
    if (m_recent_prefixes.size() == k_recent_prefixes) {
        m_recent_prefixes.erase(m_recent_prefixes.begin());
    }
    m_recent_prefixes.emplace_back(std::string(text), **id);
    return **id;
}

util::Result<int64_t> Store::put_body(const std::string& sha256, const std::string& body,
                                      size_t prefix_bytes) {
    // A body stored before is kept as it is (whole, when an older version
    // stored it), and no prefix row is made for it.
    auto known = row_id(k_body_id, sha256);
    if (!known) {
        return known.error();
    }
    if (*known) {
        return **known;
    }
    std::optional<int64_t> prefix_id;
    std::string_view stored = body;
    if (prefix_bytes > 0 && prefix_bytes <= body.size()) {
        auto id = put_prefix(stored.substr(0, prefix_bytes));
        if (!id) {
            return id.error();
        }
        prefix_id = *id;
        stored.remove_prefix(prefix_bytes);
    }
    if (!m_stmts[k_put_body].bind(sha256, stored, prefix_id).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot store requests: {}", m_stmts[k_put_body].error()));
    }
    return sqlite3_last_insert_rowid(m_db.handle());
}

util::Result<std::unordered_set<std::string>> Store::completed_keys() {
    std::unordered_set<std::string> out;
    auto& st = m_stmts[k_completed_keys];
    st.reset();
    while (st.step()) {
        out.insert(st.column_text(0));
    }
    if (!st.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read responses: {}", st.error()));
    }
    st.reset();
    return out;
}

util::Result<void> Store::for_each_stored_place(const std::string& server,
                                                const std::string& framing, int max_tokens,
                                                const PlaceVisitor& visit) {
    auto& st = m_stmts[k_group_places];
    st.bind(server, framing, max_tokens);
    while (st.step()) {
        if (!visit(StoredPlace{st.column_int(0), static_cast<int>(st.column_int(1)),
                               st.column_text(2), st.column_text(3), st.column_text(4)})) {
            break;
        }
    }
    const auto error = st.error();
    st.reset();
    if (!error.empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", error));
    }
    return {};
}

util::Result<void> Store::for_each_stored_probe_place(const std::string& probe,
                                                      const std::string& server,
                                                      const std::string& framing,
                                                      const ProbePlaceVisitor& visit) {
    auto& st = m_stmts[k_probe_places];
    st.bind(probe, server, framing);
    while (st.step()) {
        if (!visit(StoredProbePlace{st.column_int(0), static_cast<int>(st.column_int(1)),
                                    static_cast<int>(st.column_int(2)), st.column_text(3)})) {
            break;
        }
    }
    const auto error = st.error();
    st.reset();
    if (!error.empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read probe requests: {}", error));
    }
    return {};
}

util::Result<bool> Store::asked(const std::string& dataset, int64_t question_idx) {
    Statement st(m_db.handle(),
                 "SELECT 1 FROM requests WHERE dataset = ?1 AND question_idx = ?2 UNION ALL "
                 "SELECT 1 FROM probe_requests WHERE dataset = ?1 AND question_idx = ?2 LIMIT 1");
    const bool found = st.bind(dataset, question_idx).step();
    if (!st.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", st.error()));
    }
    return found;
}

util::Result<int64_t> Store::answered_requests(const std::vector<std::string>& servers) {
    Statement st(m_db.handle(),
                 "SELECT count(*) FROM requests WHERE server = ? AND response_id IS NOT NULL");
    int64_t n = 0;
    for (const auto& server : servers) {
        if (st.bind(server).step()) {
            n += st.column_int(0);
        }
        if (!st.error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", st.error()));
        }
        st.reset();
    }
    return n;
}

util::Result<int64_t> Store::answered_places(const std::string& server, const std::string& dataset,
                                             const std::string& framing, int64_t max_tokens,
                                             int64_t repeats, int64_t questions,
                                             int64_t shard_index, int64_t shard_count) {
    Statement st(m_db.handle(),
                 "SELECT count(*) FROM requests q JOIN responses r ON r.response_id = "
                 "q.response_id WHERE r.ok = 1 AND q.server = ?1 AND q.dataset = ?2 AND "
                 "q.framing = ?3 AND q.max_tokens = ?4 AND q.repeat >= 0 AND q.repeat < ?5 AND "
                 "q.question_idx >= 0 AND q.question_idx < ?6 AND (?8 = 0 OR q.question_idx % "
                 "?8 = ?7)");
    const bool found =
        st.bind(server, dataset, framing, max_tokens, repeats, questions, shard_index, shard_count)
            .step();
    if (!st.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", st.error()));
    }
    return found ? st.column_int(0) : 0;
}

util::Result<std::optional<std::pair<int64_t, std::string>>>
Store::latest_run_recording(const std::string& dataset, const std::string& key) {
    Statement st(m_db.handle(),
                 "SELECT run_id, config_json ->> ?2 FROM runs WHERE dataset = ?1 AND "
                 "json_valid(config_json) AND config_json ->> ?2 IS NOT NULL "
                 "ORDER BY run_id DESC LIMIT 1");
    const bool found = st.bind(dataset, "$." + key).step();
    if (!st.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", st.error()));
    }
    if (!found) {
        return std::optional<std::pair<int64_t, std::string>>{};
    }
    return std::optional<std::pair<int64_t, std::string>>{
        std::pair{st.column_int(0), st.column_text(1)}};
}

util::Result<bool> Store::holds_other_dataset(const std::string& dataset) {
    auto& st = m_stmts[k_other_dataset];
    const bool found = st.bind(dataset).step();
    const auto error = st.error();
    st.reset();
    if (!error.empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read runs: {}", error));
    }
    return found;
}

util::Result<bool> Store::put_unanswered(const ReadRows& read, const TakeRows& take, Wait wait) {
    std::unique_lock turn(m_turn, std::defer_lock);
    if (wait == Wait::no) {
        if (!turn.try_lock()) {
            return false;
        }
    } else {
        turn.lock();
    }
    // One transaction for the inserts and the lookups: a lookup outside one
    // is a read transaction of its own, with its file locks (two fcntl calls
    // a request).
    Transaction tx(m_db);
    if (!tx.begun()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot store requests: {}", m_db.last_error()));
    }
    m_recent_prefixes.clear();
    std::vector<RequestRow> rows;
    std::vector<Planned> planned;
    for (;;) {
        rows.clear();
        if (!read(rows)) {
            break;
        }
        planned.assign(rows.size(), Planned{});
        if (auto r = insert_requests(rows, planned, Places::checked); !r) {
            return r.error();
        }
        take(rows, planned);
    }
    if (auto r = tx.commit(); !r) {
        return r.error();
    }
    return true;
}

util::Result<void> Store::write_batch(const std::vector<ResponseRow>& rows) {
    std::lock_guard turn(m_turn);
    if (m_fail_writes > 0) {
        --m_fail_writes;
        return make_error(ErrorKind::io, "database write failed (injected by test)");
    }
    // Rows written into a file no longer named would be lost with it, and
    // the log it leaves under the name would be replayed into the file there.
    if (moved()) {
        return make_error(ErrorKind::io, fmt::format("{} {}", m_path, k_moved));
    }
    Transaction tx(m_db);
    if (!tx.begun()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write responses: {}", m_db.last_error()));
    }
    auto& ins = m_stmts[k_insert_response];
    auto& point = m_stmts[k_point_request];
    for (const auto& r : rows) {
        if (r.probe) {
            if (auto w = write_probe_response(r); !w) {
                return w;
            }
            continue;
        }
        auto id =
            r.request_id > 0 ? std::optional<int64_t>(r.request_id) : row_id(k_request_id, r.key);
        if (!id) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot write responses: {}", id.error().message));
        }
        if (!*id) {
            continue; // a request this database never planned: nothing to answer
        }
        const auto spliced = splice_response(r.response_json, r.text, r.reasoning);
        ins.bind(
            **id, r.run_id > 0 ? std::optional<int64_t>(r.run_id) : std::nullopt, r.ok ? 1 : 0,
            r.status, spliced ? *spliced : r.response_json, r.text, r.reasoning, r.finish_reason,
            r.stop_reason, r.prompt_tokens, r.completion_tokens, r.attempts, r.latency_ms,
            r.ttft_ms, r.streamed ? 1 : 0, r.token_gaps_json, r.started_at,
            r.error.empty() ? std::optional<std::string>{} : std::optional<std::string>{r.error},
            r.error_kind.empty() ? std::optional<std::string>{}
                                 : std::optional<std::string>{r.error_kind},
            r.stop_field.empty() ? std::optional<std::string>{}
                                 : std::optional<std::string>{r.stop_field},
            r.notes.empty() ? std::optional<std::string>{} : std::optional<std::string>{r.notes},
            r.redacted ? 1 : 0, spliced ? 1 : 0);
        if (!ins.run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot write responses: {}", ins.error()));
        }
        const int64_t response_id = sqlite3_last_insert_rowid(m_db.handle());
        if (!point.bind(**id, r.ok ? 1 : 0).run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot write responses: {}", point.error()));
        }
        if (r.derived) {
            if (auto w = write_derived(response_id, *r.derived); !w) {
                return w;
            }
        }
    }
    return tx.commit();
}

util::Result<void> Store::write_derived(int64_t response_id, const DerivedRows& d) {
    auto& classification = m_stmts[k_put_classification];
    auto& score = m_stmts[k_put_score];
    const auto cause = d.stop_cause.empty() ? std::optional<std::string_view>{}
                                            : std::optional<std::string_view>{d.stop_cause};
    if (!classification
             .bind(response_id, d.opened ? 1 : 0, d.closed ? 1 : 0, d.reasoning_started ? 1 : 0,
                   d.outcome, cause)
             .run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write classifications: {}", classification.error()));
    }
    for (const auto& s : d.scores) {
        if (!score
                 .bind(response_id, s.scorer, s.scorer_version, s.score_text, s.extracted,
                       s.valid ? 1 : 0, s.correct ? 1 : 0)
                 .run()) {
            return make_error(ErrorKind::io, fmt::format("cannot write scores: {}", score.error()));
        }
    }
    return {};
}

util::Result<void> Store::write_probe_response(const ResponseRow& r) {
    auto& ins = m_stmts[k_insert_probe_response];
    auto& point = m_stmts[k_point_probe_request];
    const auto& g = r.reading;
    auto opt = [](const std::string& s) {
        return s.empty() ? std::optional<std::string>{} : std::optional<std::string>{s};
    };
    auto id =
        r.request_id > 0 ? std::optional<int64_t>(r.request_id) : row_id(k_probe_request_id, r.key);
    if (!id) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write probe responses: {}", id.error().message));
    }
    if (!*id) {
        return {}; // a probe request this database never planned
    }
    const auto spliced = g ? splice_probe(r.response_json, g->top_json) : std::nullopt;
    ins.bind(**id, r.run_id > 0 ? std::optional<int64_t>(r.run_id) : std::nullopt, r.ok ? 1 : 0,
             // A probe is always sent, so always timed.
             r.status, spliced ? *spliced : r.response_json, r.attempts, r.latency_ms.value_or(0),
             r.started_at, opt(r.error), opt(r.error_kind),
             g ? std::optional<std::string>(g->chosen) : std::nullopt,
             g ? std::optional<std::string>(g->top_json) : std::nullopt,
             g ? std::optional<double>(g->p_marker) : std::nullopt,
             g ? std::optional<int64_t>(g->marker_listed) : std::nullopt,
             g ? std::optional<double>(g->p_whitespace) : std::nullopt,
             g ? std::optional<int64_t>(g->whitespace_listed) : std::nullopt,
             g ? std::optional<double>(g->floor) : std::nullopt, spliced ? 1 : 0);
    if (!ins.run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write probe responses: {}", ins.error()));
    }
    if (!point.bind(**id, r.ok ? 1 : 0).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write probe responses: {}", point.error()));
    }
    return {};
}

util::Result<std::optional<int64_t>> Store::row_id(StatementId find, const std::string& key) {
    auto& st = m_stmts[find];
    if (st.bind(key).step()) {
        const int64_t id = st.column_int(0);
        st.reset();
        return std::optional<int64_t>(id);
    }
    if (!st.error().empty()) {
        return make_error(ErrorKind::io, st.error());
    }
    return std::optional<int64_t>{};
}

namespace {

constexpr auto k_batch_window = std::chrono::milliseconds{25};
constexpr size_t k_batch_rows = 1024;

} // namespace

namespace {

// SQLite's own threshold for an automatic checkpoint, in WAL frames.
constexpr int k_checkpoint_frames = 1000;
// Past this the writer waits for the checkpoint thread before its next batch.
constexpr int k_checkpoint_room = 4 * k_checkpoint_frames;
// Past this the committing connection checkpoints itself: a last resort, as
// planning's commits do not wait.
constexpr int k_checkpoint_cap = 16 * k_checkpoint_frames;
// Checkpoints in a row, each copying what was committed during the last.
constexpr int k_catch_up_passes = 4;

} // namespace

Checkpointer::Checkpointer(Store& store) : m_store(store) {
    // A connection knows the file is in WAL mode once it has read it.
    if (!m_db.open(store.path(), Database::Create::no) ||
        !m_db.exec("SELECT count(*) FROM sqlite_master")) {
        return; // the store keeps its automatic checkpoints
    }
    // A file put in the store's place would get the store's log copied
    // into it: both must still be the file the path names.
    if (has_moved(m_store.handle()) || has_moved(m_db.handle())) {
        return;
    }
    sqlite3_wal_hook(m_store.handle(), &Checkpointer::on_commit, this);
    m_hooked = true;
    m_thread = std::thread([this] { loop(); });
}

Checkpointer::~Checkpointer() {
    if (!m_hooked) {
        return;
    }
    // The hook goes first, so no commit calls into a Checkpointer that is
    // going away.
    sqlite3_wal_autocheckpoint(m_store.handle(), k_checkpoint_frames);
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_one();
    m_thread.join();
}

int Checkpointer::on_commit(void* self, sqlite3* db, const char* name, int frames) {
    auto* c = static_cast<Checkpointer*>(self);
    if (frames < c->m_frames) {
        // This commit started the WAL over: nothing in it is copied yet.
        ++c->m_generation;
        c->m_backfilled = 0;
    }
    c->m_frames = frames;
    if (frames >= k_checkpoint_cap) {
        // The checkpoint thread has not kept up: this commit checkpoints,
        // as SQLite's own hook would.
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
    return SQLITE_OK;
}

int Checkpointer::pending() const {
    const int frames = m_frames;
    const int backfilled = m_backfilled;
    // A WAL started over has fewer frames than were copied before (when a
    // checkpoint's count lands just after the commit that started it over).
    return frames >= backfilled ? frames - backfilled : frames;
}

void Checkpointer::run_if_due() {
    if (!m_hooked || pending() < k_checkpoint_frames) {
        return;
    }
    {
        std::lock_guard lock(m_mutex);
        m_due = true;
    }
    m_wake.notify_one();
}

void Checkpointer::wait_for_room() {
    // The WAL's size, not what is left to copy: a checkpoint that copied
    // everything it saw has usually seen less than the WAL holds by the time
    // it ends, so only a pause in commits lets it catch up and the next
    // commit start the WAL over.
    if (!m_hooked || m_frames < k_checkpoint_room || pending() == 0) {
        return;
    }
    std::unique_lock lock(m_mutex);
    // A round under way may have begun before the newest frames: wait for
    // up to three, each of which ends even when its checkpoint fails.
    for (int round = 0; round < 3 && !m_stop && pending() > 0; ++round) {
        m_due = true;
        m_wake.notify_one();
        const uint64_t seen = m_rounds;
        m_done.wait(lock, [&] { return m_stop || m_rounds != seen; });
    }
}

void Checkpointer::loop() {
    std::unique_lock lock(m_mutex);
    for (;;) {
        if (!m_due) {
            ++m_rounds;
            m_done.notify_all();
        }
        m_wake.wait(lock, [this] { return m_stop || m_due; });
        if (m_stop) {
            m_done.notify_all();
            return;
        }
        m_due = false;
        lock.unlock();
        // Asked for while the last one ran: it may have copied those frames.
        // A commit starts the WAL over only when a checkpoint has copied all
        // of it, and commits go on while one copies, so a few short passes
        // follow to catch up with them; otherwise the WAL would grow to the
        // cap before it started over.
        // A round starts when a threshold's worth is waiting, or anything is
        // while the writer waits for room.
        const bool worth =
            pending() >= k_checkpoint_frames || (m_frames >= k_checkpoint_room && pending() > 0);
        for (int pass = 0; worth && pass < k_catch_up_passes && pending() > 0; ++pass) {
            // PASSIVE: copy what no reader still needs, waiting for nobody.
            int log = 0;
            int copied = 0;
            const uint64_t generation = m_generation;
            if (sqlite3_wal_checkpoint_v2(m_db.handle(), "main", SQLITE_CHECKPOINT_PASSIVE, &log,
                                          &copied) != SQLITE_OK) {
                break;
            }
            // A count from before the WAL started over says nothing of it.
            if (m_generation == generation) {
                m_backfilled = copied;
            }
        }
        lock.lock();
    }
}

Writer::Writer(Store& store, Prepare prepare)
    : m_store(store), m_prepare(std::move(prepare)), m_checkpointer(std::in_place, store),
      m_thread([this] { loop(); }) {}

Writer::~Writer() {
    close();
}

void Writer::push(ResponseRow row) {
    bool wake = false;
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(std::move(row));
        // Only the first row of a batch and a full batch are worth a wake-up.
        wake = m_queue.size() == 1 || m_queue.size() == k_batch_rows;
    }
    if (wake) {
        m_wake.notify_one();
    }
}

void Writer::flush() {
    std::unique_lock lock(m_mutex);
    ++m_flushing;
    m_wake.notify_one();
    m_done.wait(lock, [this] { return m_queue.empty() && !m_busy; });
    --m_flushing;
}

void Writer::close() {
    {
        std::lock_guard lock(m_mutex);
        if (m_stop) {
            return;
        }
        m_stop = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable()) {
        m_thread.join();
    }
    m_checkpointer.reset();
}

std::optional<std::string> Writer::error() const {
    std::lock_guard lock(m_mutex);
    return m_error;
}

int64_t Writer::committed() const {
    std::lock_guard lock(m_mutex);
    return m_committed;
}

size_t Writer::backlog() const {
    std::lock_guard lock(m_mutex);
    return m_queue.size();
}

void Writer::wait_below(size_t rows, std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_mutex);
    if (m_queue.size() < rows) {
        return;
    }
    m_nudged = true;
    m_wake.notify_one();
    m_done.wait_for(lock, timeout, [&] { return m_queue.size() < rows || m_stop; });
}

void Writer::nudge() {
    {
        std::lock_guard lock(m_mutex);
        if (m_nudged) {
            return;
        }
        m_nudged = true;
    }
    m_wake.notify_one();
}

void Writer::loop() {
    // The queue and the batch trade storage: each keeps the capacity the
    // last batch grew, so rows are not moved again as the vector doubles and
    // its pages are not asked of the allocator (and cleared by the kernel)
    // anew for every batch. The sender's backlog limit bounds both.
    std::vector<ResponseRow> batch;
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_wake.wait(lock, [this] { return m_stop || !m_queue.empty(); });
        if (m_queue.empty() && m_stop) {
            break;
        }
        m_wake.wait_for(lock, k_batch_window, [this] {
            return m_stop || m_flushing > 0 || m_nudged || m_queue.size() >= k_batch_rows;
        });
        batch.swap(m_queue);
        m_busy = true;
        m_nudged = false;
        lock.unlock();
        // The queue is empty again: a sender held back by wait_below goes on.
        m_done.notify_all();
        if (m_prepare) {
            for (auto& row : batch) {
                m_prepare(row);
            }
        }
        auto r = m_store.write_batch(batch);
        if (!r) {
            // Keep the rows and try once more before reporting: a transient
            // lock by a reader should not lose responses.
            r = m_store.write_batch(batch);
        }
        if (m_checkpointer) {
            m_checkpointer->run_if_due();
            // Before the next batch: the WAL stays near k_checkpoint_room
            // frames when the disk is slower than the writer.
            m_checkpointer->wait_for_room();
        }
        const auto written = static_cast<int64_t>(batch.size());
        batch.clear();
        lock.lock();
        m_busy = false;
        if (r) {
            m_committed += written;
        } else if (!m_error) {
            m_error = r.error().message;
        }
        m_done.notify_all();
    }
    m_done.notify_all();
}

} // namespace diffeval::store
