use std::ffi::{c_void, CString};
use std::fmt;
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr;

use tether_sys as sys;

use crate::error::{check, Error, Result};
use crate::Resource;

/// A function receiving log lines, boxed and owned by the C adaptor.
type LogFn = Box<dyn Fn(&str) + Send + Sync + 'static>;

/// Options of a logging adaptor (`tether_logging_options_t`): start with
/// [`Resource::logging_adaptor`], give a `path`, a `callback` or both, then
/// [`LoggingBuilder::build`].
#[must_use = "a builder does nothing until build() is called"]
pub struct LoggingBuilder<'a> {
    upstream: &'a Resource,
    path: Option<PathBuf>,
    callback: Option<LogFn>,
}

impl fmt::Debug for LoggingBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoggingBuilder")
            .field("upstream", self.upstream)
            .field("path", &self.path)
            .field("callback", &self.callback.is_some())
            .finish()
    }
}

impl Resource {
    /// An adaptor over `upstream` (which it retains) that logs every allocate and
    /// free as one CSV line (`time_ns,thread,action,pointer,size,stream,status`,
    /// after a header line) to a file and/or a callback (`tether_logging_adaptor_create`).
    ///
    /// ```no_run
    /// # fn main() -> tether::Result<()> {
    /// let host = tether::Resource::host()?;
    /// let logged = tether::Resource::logging_adaptor(&host).path("alloc.csv").build()?;
    /// # Ok(()) }
    /// ```
    pub fn logging_adaptor(upstream: &Resource) -> LoggingBuilder<'_> {
        LoggingBuilder {
            upstream,
            path: None,
            callback: None,
        }
    }

    /// Write out the lines a logging adaptor's file buffers (`tether_logging_adaptor_flush`);
    /// a no-op for a callback-only adaptor, `NotSupported` for other kinds.
    pub fn logging_flush(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::tether_logging_adaptor_flush(self.as_raw()) })
    }
}

unsafe extern "C" fn log_line(line: *const c_char, length: usize, user: *mut c_void) {
    // Never unwind into C: a panicking callback loses its line.
    let _ = super::guarded(|| {
        // SAFETY: `user` is the LogFn box the adaptor owns; `line` holds `length` bytes for this call.
        let f = unsafe { &*(user as *const LogFn) };
        let bytes = unsafe { std::slice::from_raw_parts(line.cast::<u8>(), length) };
        f(&String::from_utf8_lossy(bytes));
    });
}

unsafe extern "C" fn log_destroy(user: *mut c_void) {
    // SAFETY: called once, with the box handed over at creation.
    let _ = super::guarded(|| drop(unsafe { Box::from_raw(user as *mut LogFn) }));
}

impl LoggingBuilder<'_> {
    /// File to write the log to (created, or truncated if it exists).
    pub fn path(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    /// A function that receives every line (without the newline), on the
    /// allocating thread, possibly several at once; it must not use the
    /// logging adaptor. A panic in it is caught (that line is lost).
    pub fn callback(mut self, callback: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.callback = Some(Box::new(callback));
        self
    }

    /// Create the adaptor. `InvalidArgument` if neither `path` nor `callback`
    /// was given, or if the file cannot be opened (the message names the path).
    pub fn build(self) -> Result<Resource> {
        let path = match &self.path {
            Some(p) => Some(
                CString::new(p.as_os_str().as_bytes())
                    .map_err(|_| Error::new(sys::TETHER_ERROR_INVALID_ARGUMENT, "path: contains a NUL byte"))?,
            ),
            None => None,
        };
        let mut options = super::defaults(sys::tether_logging_options_init, "tether_logging_options_init");
        options.path = path.as_ref().map_or(ptr::null(), |p| p.as_ptr());
        let user = self.callback.map(|f| Box::into_raw(Box::new(f)));
        if let Some(user) = user {
            options.callback = Some(log_line);
            options.user = user.cast();
            options.destroy = Some(log_destroy);
        }
        let mut out = ptr::null_mut();
        // SAFETY: live upstream; options initialised, `path` alive for the call
        // (copied by C); on success the adaptor owns `user` and frees it with log_destroy.
        let status = unsafe { sys::tether_logging_adaptor_create(self.upstream.as_raw(), &options, &mut out) };
        if status != sys::TETHER_OK {
            if let Some(user) = user {
                // SAFETY: on failure the caller keeps `user`: ours to free.
                drop(unsafe { Box::from_raw(user) });
            }
        }
        Resource::created(status, out)
    }
}
