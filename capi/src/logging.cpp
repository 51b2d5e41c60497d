// tether_logging_adaptor_create / _flush: the core LoggingAdaptor with the
// C callback as its sink.
#include <string>

#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/logging.hpp"
#include "user_context.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_logging_adaptor_create(tether_resource_t* upstream,
                                                         const tether_logging_options_t* options,
                                                         tether_resource_t** out) {
  return guard("tether_logging_adaptor_create", [&] {
    require_out(out);
    *out = nullptr;
    require_out(options, "options");
    ResourceRef up(upstream);
    const tether_logging_options_t o = read_options(options, kLoggingDefaults, "options");
    if ((o.path == nullptr || o.path[0] == '\0') && o.callback == nullptr)
      core::throw_invalid_argument("options: give options->path or options->callback (both are empty)");
    UserContext user(o.destroy, o.user);
    core::LoggingOptions lo;
    if (o.path != nullptr) lo.path = o.path;
    if (o.callback != nullptr) {
      lo.sink = [cb = o.callback, u = o.user](const char* line, std::size_t length) { cb(line, length, u); };
    }
    lo.destroy = user.destroyer();
    std::string refusal;
    std::string spec_args = spec::format_options("logging", &o, &refusal);  // the file
    if (o.callback != nullptr) refusal = "a logging adaptor with a callback cannot be named in a spec";
    *out = make_resource_handle(core::make_logging_adaptor(up->core, std::move(lo)), upstream, std::move(spec_args),
                                std::move(refusal));
    user.arm();
  });
}

TETHER_API tether_status_t tether_logging_adaptor_flush(tether_resource_t* resource) {
  return guard("tether_logging_adaptor_flush", [&] {
    ResourceRef r(resource);
    core::flush_log(*r->core);
  });
}

TETHER_API tether_status_t tether_logging_adaptor_get_info(tether_resource_t* resource, tether_logging_info_t* out) {
  return guard("tether_logging_adaptor_get_info", [&] {
    ResourceRef r(resource);
    const core::LogInfo i = core::log_info(*r->core);
    tether_logging_info_t c = TETHER_LOGGING_INFO_INIT;
    c.lines = i.lines;
    c.lost_lines = i.lost_lines;
    c.error = i.error;
    write_info(out, c, "out");
  });
}

}  // extern "C"
