// What a server row says a server was, compared between two rows of one
// name: a run resumed into a database (engine/run.cpp) and a file merged
// into another (merge.cpp) must not put two servers' answers under one name.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace diffeval::store {

// The start of servers.url for a server whose responses were imported from
// an lm-eval samples file ("lm-eval:" and the file's path).
inline constexpr std::string_view k_imported_url_prefix = "lm-eval:";

// The profile diffeval's simulator named itself by in `info` (a server row's
// info_json, parsed): its /version carries "diffeval_simulator" beside the
// vLLM version it imitates (docs/simulator.md; since 2026-12-06); nullopt
// for any other server.
std::optional<std::string> simulator_profile(const nlohmann::json& info);

// A server as its row of table servers tells it; "" where it says nothing.
struct ServerIdentity {
    std::string origin;     // "lm-eval import" or "live server", from servers.url
    std::string model;      // servers.model
    std::string version;    // what GET /version answered (servers.info_json's "version")
    std::string facts_json; // servers.facts_json
    // How diffeval launched it (servers.info_json's "launch": its env as
    // NAME=value, then its argv or shell command, the URL's port as
    // "{port}"); empty for a server it did not launch or an older row.
    std::vector<std::string> launch;
    // The files its launch command names, as written there, with the
    // sha256 of what each held (servers.info_json's "launch_files"): a
    // script that changed launches another server under the same command.
    std::map<std::string, std::string> launch_files;
    // Whether the server was asked what it is (servers.info_json holds its
    // /v1/models answer: no --no-preflight), and the simulator profile its
    // /version named (diffeval's simulator names itself since 2026-12-06).
    bool probed = false;
    std::optional<std::string> simulator;
};

// A launched server's "launch" list (ServerIdentity::launch): `env`, then
// `argv` (one shell command string when `shell`), each occurrence of `port`
// between non-digits written "{port}", so a server restarted on another
// port is launched the same way.
std::vector<std::string>
launch_identity(const std::vector<std::pair<std::string, std::string>>& env,
                const std::vector<std::string>& argv, std::string_view port);

// Where two launch lists differ, each side's differing tokens with the one
// before them for context ("... 4096 -ctk q4_0"); nullopt when equal.
std::optional<std::pair<std::string, std::string>>
launch_difference(const std::vector<std::string>& a, const std::vector<std::string>& b);

// The identity a row's columns give: `url` is read for the origin,
// `info_json` for its "version".
ServerIdentity server_identity(std::string_view url, std::string model, std::string_view info_json,
                               std::string facts_json);

// One thing two servers of one name both know and hold different values of.
struct ServerDifference {
    std::string what; // "origin", "model", "version", "engine" or "fingerprint fact NAME"
    std::string a;    // the first server's value
    std::string b;    // the second's
};

// The first file both launches name whose contents differ, as ("launch file
// PATH", "sha256 PREFIX" of each); nullopt when none.
std::optional<ServerDifference> launch_file_difference(const ServerIdentity& a,
                                                       const ServerIdentity& b);

// When `stored` was diffeval's simulator and the server asked now (`now`,
// probed) is not: ("origin", "diffeval's simulator (profile P)", "a live
// server whose /version names no simulator"). One way only: a simulator
// before 2026-12-06 did not name itself, so a stored row that names none
// may be one, and a real vLLM answers /version as the simulator does.
std::optional<ServerDifference> simulator_difference(const ServerIdentity& stored,
                                                     const ServerIdentity& now);

// The first difference of `a` and `b`: the origin (answers imported from
// lm-eval are not a live server's), the model, then the version, then the
// engine whose fingerprint rules matched, then each fingerprint fact by name;
// nullopt when none. Only what both know is compared: URLs differ for the
// same server restarted or sharded over machines, and so do the facts each
// knows (a server diffeval launched has its log's, one it attached to only
// what /props said). Facts are read back as every reader reads them
// (fingerprint_from_json), so a fact an older diffeval stored in the server's
// own words ("11669 (Debian)") is the same fact in its one form
// ("b11669-Debian").
std::optional<ServerDifference> first_difference(const ServerIdentity& a, const ServerIdentity& b);

} // namespace diffeval::store
