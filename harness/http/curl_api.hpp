// libcurl, loaded when a transfer first needs it.
//
// diffeval links no libcurl: libcurl.so.4 brings some thirty shared
// libraries (LDAP, GnuTLS, Kerberos, SSH, RTMP...) whose loading and
// constructors cost a process about 8.5 ms of CPU before main() on these
// machines, of a run's ~52 ms to its first request and of every command's
// start. Plain http:// (the run's requests, preflight, launched servers) goes
// through Boost.Beast; libcurl is opened with dlopen() the first time an
// https:// or proxied transfer, or a URL the quick check below cannot vouch
// for, needs it.
#pragma once

#include <harness/util/result.hpp>

#include <curl/curl.h>

#include <optional>
#include <string>
#include <string_view>

namespace diffeval::http::detail {

// The libcurl functions diffeval calls, with libcurl's own signatures.
struct CurlApi {
    decltype(&::curl_global_init) global_init = nullptr;
    decltype(&::curl_easy_init) easy_init = nullptr;
    decltype(&::curl_easy_setopt) easy_setopt = nullptr;
    decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
    decltype(&::curl_easy_reset) easy_reset = nullptr;
    decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
    decltype(&::curl_easy_strerror) easy_strerror = nullptr;
    decltype(&::curl_slist_append) slist_append = nullptr;
    decltype(&::curl_slist_free_all) slist_free_all = nullptr;
    decltype(&::curl_multi_init) multi_init = nullptr;
    decltype(&::curl_multi_setopt) multi_setopt = nullptr;
    decltype(&::curl_multi_add_handle) multi_add_handle = nullptr;
    decltype(&::curl_multi_remove_handle) multi_remove_handle = nullptr;
    decltype(&::curl_multi_assign) multi_assign = nullptr;
    decltype(&::curl_multi_timeout) multi_timeout = nullptr;
    decltype(&::curl_multi_socket_action) multi_socket_action = nullptr;
    decltype(&::curl_multi_perform) multi_perform = nullptr;
    decltype(&::curl_multi_poll) multi_poll = nullptr;
    decltype(&::curl_multi_info_read) multi_info_read = nullptr;
    decltype(&::curl_multi_cleanup) multi_cleanup = nullptr;
    decltype(&::curl_url) url = nullptr;
    decltype(&::curl_url_set) url_set = nullptr;
    decltype(&::curl_url_get) url_get = nullptr;
    decltype(&::curl_url_cleanup) url_cleanup = nullptr;
    decltype(&::curl_url_strerror) url_strerror = nullptr;
    decltype(&::curl_free) free = nullptr;
};

// libcurl's functions, loaded (and curl_global_init called) on the first
// call, from any thread; or, on every call, why it could not be loaded, in
// one line that says what to install.
util::Result<const CurlApi*> curl_api();

// Whether `url` is of a form libcurl's URL parser takes, checked without
// it: http:// or https://, a host name that starts with a letter or a dotted
// quad, a port 1-65535 without leading zeros, a path of letters, digits and
// "-._~/", nothing else. False says only that libcurl must be asked.
bool plainly_valid_url(std::string_view url);

// What libcurl's URL parser finds wrong with `url`, in its words, or a port
// of zero; nothing when it takes it. Loads libcurl.
std::optional<std::string> curl_url_problem(const std::string& url);

// Whether libcurl has been loaded in this process (for tests: a plain
// http:// run never loads it).
bool curl_loaded();

} // namespace diffeval::http::detail
