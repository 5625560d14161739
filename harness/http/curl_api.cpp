// See curl_api.hpp.
#include <harness/http/curl_api.hpp>

#include <fmt/format.h>

#include <atomic>
#include <dlfcn.h>
#include <string>

namespace diffeval::http::detail {

namespace {

// The soname of libcurl's ABI 4, which Debian's libcurl4 installs (the
// headers diffeval is built with, libcurl4-openssl-dev, depend on it).
constexpr const char* k_library = "libcurl.so.4";

std::atomic<bool> g_loaded{false};

struct Loaded {
    CurlApi api;
    std::string error; // empty when loaded
};

// `slot` from the library's symbol `name`; the first one missing named in
// `error`.
template <typename F> void bind(void* handle, const char* name, F& slot, std::string& error) {
    // dlsym's void* to a function pointer: what POSIX requires to work.
    slot = reinterpret_cast<F>(dlsym(handle, name));
    if (!slot && error.empty()) {
        error = fmt::format("{} has no function {}", k_library, name);
    }
}

Loaded load() {
    Loaded out;
    // RTLD_LOCAL: its symbols serve only the pointers taken below.
    void* handle = dlopen(k_library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        out.error =
            fmt::format("https:// and proxied URLs need libcurl, which could not be loaded ({}); "
                        "install it with 'apt-get install libcurl4'",
                        why ? why : k_library);
        return out;
    }
    auto& a = out.api;
    std::string& e = out.error;
    bind(handle, "curl_global_init", a.global_init, e);
    bind(handle, "curl_easy_init", a.easy_init, e);
    bind(handle, "curl_easy_setopt", a.easy_setopt, e);
    bind(handle, "curl_easy_getinfo", a.easy_getinfo, e);
    bind(handle, "curl_easy_reset", a.easy_reset, e);
    bind(handle, "curl_easy_cleanup", a.easy_cleanup, e);
    bind(handle, "curl_easy_strerror", a.easy_strerror, e);
    bind(handle, "curl_slist_append", a.slist_append, e);
    bind(handle, "curl_slist_free_all", a.slist_free_all, e);
    bind(handle, "curl_multi_init", a.multi_init, e);
    bind(handle, "curl_multi_setopt", a.multi_setopt, e);
    bind(handle, "curl_multi_add_handle", a.multi_add_handle, e);
    bind(handle, "curl_multi_remove_handle", a.multi_remove_handle, e);
    bind(handle, "curl_multi_assign", a.multi_assign, e);
    bind(handle, "curl_multi_timeout", a.multi_timeout, e);
    bind(handle, "curl_multi_socket_action", a.multi_socket_action, e);
    bind(handle, "curl_multi_perform", a.multi_perform, e);
    bind(handle, "curl_multi_poll", a.multi_poll, e);
    bind(handle, "curl_multi_info_read", a.multi_info_read, e);
    bind(handle, "curl_multi_cleanup", a.multi_cleanup, e);
    bind(handle, "curl_url", a.url, e);
    bind(handle, "curl_url_set", a.url_set, e);
    bind(handle, "curl_url_get", a.url_get, e);
    bind(handle, "curl_url_cleanup", a.url_cleanup, e);
    bind(handle, "curl_url_strerror", a.url_strerror, e);
    bind(handle, "curl_free", a.free, e);
    if (!e.empty()) {
        e += " (it is older than 7.88, which diffeval is built for)";
        return out;
    }
    // The handle stays open for the process's life: the pointers point into it.
    if (a.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        e = "libcurl could not initialise itself (curl_global_init failed)";
        return out;
    }
    g_loaded = true;
    return out;
}

} // namespace

util::Result<const CurlApi*> curl_api() {
    static const Loaded loaded = load();
    if (!loaded.error.empty()) {
        return util::make_error(util::ErrorKind::transport, loaded.error);
    }
    return &loaded.api;
}

bool curl_loaded() {
    return g_loaded;
}

} // namespace diffeval::http::detail
