// What two of the views compute, as SQL diffeval's own queries read instead
// of the views. Internal to harness/store.
//
// The views are for users (docs/schema.md), and a file's views are the
// file's: a view redefined in a colleague's file (or a hostile one: an
// endless recursive query) changed what diffeval printed, or held `diff`,
// `report` and `gate` at full CPU until killed (a hostile-file audit). Each
// text here is the body of the view as the schema's last version to make it
// created it (k_schema_v12, k_schema_v15 in store.cpp); a unit test holds
// the two together.
#pragma once

#include <string_view>

namespace diffeval::store {

// v_request_bodies (version 12): each stored body with its shared prefix.
inline constexpr std::string_view k_request_bodies_select =
    "SELECT b.body_id, b.body_sha256, coalesce(p.text, '') || b.request_json AS request_json "
    "FROM request_bodies b "
    "LEFT JOIN body_prefixes p ON p.prefix_id = b.prefix_id";

// v_probes (version 15): each probe chain's P(open), and whether it is a bound.
inline constexpr std::string_view k_probes_select =
    "SELECT q.probe, q.server, q.framing, q.repeat, q.question_idx, q.dataset, "
    "r.p_marker AS p_direct, "
    "r.p_whitespace, "
    "r2.p_marker AS p_after_whitespace, "
    "CASE WHEN r.marker_listed IS NULL THEN NULL "
    "WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1 "
    "AND r2.marker_listed IS NULL THEN NULL "
    "WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1 "
    "AND r2.marker_listed = 0 AND r.marker_listed = 1 "
    "THEN min(1.0, r.p_marker + r.p_whitespace * r2.floor) "
    "WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1) "
    "THEN min(1.0, CASE WHEN r.marker_listed = 1 THEN r.p_marker ELSE 0 END + "
    "CASE WHEN r.whitespace_listed = 1 AND r2.marker_listed = 1 "
    "THEN r.p_whitespace * r2.p_marker ELSE 0 END) "
    "WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1 "
    "THEN min(1.0, r.floor + r.p_whitespace * r2.floor) "
    "ELSE r.floor END AS p_open, "
    "CASE WHEN r.marker_listed IS NULL THEN NULL "
    "WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1 "
    "AND r2.marker_listed IS NULL THEN NULL "
    "WHEN q2.probe_request_id IS NOT NULL AND r.whitespace_listed = 1 "
    "AND r2.marker_listed = 0 THEN 1 "
    "WHEN r.marker_listed = 1 OR (r.whitespace_listed = 1 AND r2.marker_listed = 1) "
    "THEN 0 ELSE 1 END AS bounded, "
    "r.chosen, r.top_json, r2.top_json AS top_after_whitespace, "
    "r.response_id, r2.response_id AS response_id_after_whitespace "
    "FROM probe_requests q "
    "JOIN probe_responses r ON r.response_id = q.response_id AND r.ok = 1 "
    "LEFT JOIN probe_requests q2 ON q2.probe = q.probe AND q2.step = 1 AND q2.server = q.server "
    "AND q2.framing = q.framing AND q2.repeat = q.repeat AND q2.question_idx = q.question_idx "
    "AND q2.dataset = q.dataset "
    "LEFT JOIN probe_responses r2 ON r2.response_id = q2.response_id AND r2.ok = 1 "
    "WHERE q.step = 0";

} // namespace diffeval::store
