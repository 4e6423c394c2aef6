//! Windows: a Job object for the server's tree, console control events, owner-only ACLs
//! and a rename that waits for a client holding its config file open. Through
//! `windows-sys` (Microsoft's bindings); every `unsafe` block says what it relies on.
//! The `unsafe` is here because std has none of these calls on Windows and no well-kept
//! safe crate covers Job objects and DACLs together; it is not a performance choice, and
//! it stays in this one module.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_LOCK_VIOLATION, ERROR_SHARING_VIOLATION, HANDLE,
};
use windows_sys::Win32::Security::Authorization::{SE_FILE_OBJECT, SetNamedSecurityInfoW};
use windows_sys::Win32::Security::{
    ACCESS_ALLOWED_ACE, ACL, ACL_REVISION, AddAccessAllowedAceEx, DACL_SECURITY_INFORMATION,
    GetLengthSid, GetTokenInformation, InitializeAcl, PROTECTED_DACL_SECURITY_INFORMATION,
    SUB_CONTAINERS_AND_OBJECTS_INHERIT, TOKEN_QUERY, TOKEN_USER, TokenUser,
};
use windows_sys::Win32::Storage::FileSystem::FILE_ALL_ACCESS;
use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, GetCurrentProcess, GetExitCodeProcess, OpenProcess, OpenProcessToken,
    PROCESS_QUERY_LIMITED_INFORMATION,
};

// Windows has no signals. These numbers name the stop requests the proxy makes, with
// their Unix meanings: SIGKILL ends the Job (the whole tree, at once); the others send
// Ctrl-Break to the server's console process group, its chance to exit cleanly.
pub const SIGINT: i32 = 2;
pub const SIGTERM: i32 = 15;
pub const SIGKILL: i32 = 9;
pub const SIGHUP: i32 = 1;

/// The exit code a server ended by [`SIGKILL`] gets (as a process killed by SIGKILL
/// reports 128 + 9 from a Unix shell).
const KILLED_EXIT_CODE: u32 = 137;

/// The server and everything it starts: a Job object (killed whole, and killed when
/// mcpwall dies, as its last handle closes) and a console process group of its own (so a
/// Ctrl-C in mcpwall's console reaches only mcpwall, which forwards it once, as Ctrl-Break).
///
/// The server is put in the Job right after it starts, so a process it started in that
/// instant would escape the Job; everything started later is in it. (std cannot create a
/// process suspended, which would close that gap.)
#[derive(Debug)]
pub struct ProcessTree {
    job: OwnedHandle,
    group: u32,
}

impl ProcessTree {
    /// Make the command start a new console process group.
    pub fn prepare(command: &mut tokio::process::Command) {
        command.creation_flags(CREATE_NEW_PROCESS_GROUP);
    }

    /// Put the child just spawned from a [`Self::prepare`]d command in a new Job.
    pub fn adopt(child: &tokio::process::Child) -> io::Result<ProcessTree> {
        let (Some(process), Some(pid)) = (child.raw_handle(), child.id()) else {
            return Err(io::Error::other(
                "the server exited before it could be tracked",
            ));
        };
        // SAFETY: no attributes, no name; the handle returned is checked before use.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new, valid handle that nothing else owns.
        let job = unsafe { OwnedHandle::from_raw_handle(raw) };
        // SAFETY: the struct is plain data, valid when zeroed.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: a valid job handle and a pointer to a struct of the size given.
        check(unsafe {
            SetInformationJobObject(
                job.as_raw_handle() as HANDLE,
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        })?;
        // SAFETY: both handles are valid; the child's is kept open by `child`.
        check(unsafe {
            AssignProcessToJobObject(job.as_raw_handle() as HANDLE, process as HANDLE)
        })?;
        Ok(ProcessTree { job, group: pid })
    }

    /// Ask the tree to stop ([`SIGKILL`]: end it now).
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        if signal == SIGKILL {
            // SAFETY: a valid job handle.
            check(unsafe {
                TerminateJobObject(self.job.as_raw_handle() as HANDLE, KILLED_EXIT_CODE)
            })
        } else {
            // Fails when the server has no console (mcpwall started without one); the
            // shutdown then ends the Job after its grace period.
            // SAFETY: plain values.
            check(unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, self.group) })
        }
    }

    /// Whether a process of the tree still runs.
    pub fn exists(&self) -> bool {
        // SAFETY: the struct is plain data, valid when zeroed.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: a valid job handle and a pointer to a struct of the size given.
        let ok = unsafe {
            QueryInformationJobObject(
                self.job.as_raw_handle() as HANDLE,
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        ok != 0 && info.ActiveProcesses > 0
    }
}

/// Forward the stop requests mcpwall receives to `tx`: Ctrl-C as SIGINT, Ctrl-Break as
/// SIGTERM, the console closing as SIGHUP. Must be called inside a tokio runtime.
pub fn forward_stop_requests(tx: tokio::sync::mpsc::UnboundedSender<i32>) -> io::Result<()> {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let mut c = ctrl_c()?;
    let mut brk = ctrl_break()?;
    let mut close = ctrl_close()?;
    tokio::spawn(async move {
        loop {
            let signal = tokio::select! {
                Some(()) = c.recv() => SIGINT,
                Some(()) = brk.recv() => SIGTERM,
                Some(()) = close.recv() => SIGHUP,
                else => break,
            };
            if tx.send(signal).is_err() {
                break;
            }
        }
    });
    Ok(())
}

/// The program a client's `command` names, found the way a Windows shell finds it: a bare
/// name (`npx`) is looked up on `PATH` with each extension of `PATHEXT` (`.COM;.EXE;.BAT;
/// .CMD`), so the `npx.cmd` shim npm installs is found; std alone would try `npx.exe`
/// only. A `.cmd`/`.bat` found this way is run by std through `cmd.exe`, with std's
/// quoting of its arguments. Anything not found is returned as given (std then reports it).
/// Servers are never started through the sandbox helper here (`other_sandbox`): the
/// spawn itself reports a missing program.
pub fn program_exists(
    _program: &std::ffi::OsStr,
    _env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> bool {
    true
}

/// This program (unused on Windows, where there is no sandbox helper).
pub fn own_executable() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "mcpwall.exe".into())
}

pub fn resolve_program(program: &std::ffi::OsStr) -> std::ffi::OsString {
    find_program(
        program,
        std::env::var_os("PATH").as_deref(),
        std::env::var_os("PATHEXT").as_deref(),
    )
    .map_or_else(|| program.to_owned(), |found| found.into_os_string())
}

fn find_program(
    program: &std::ffi::OsStr,
    path_var: Option<&std::ffi::OsStr>,
    pathext: Option<&std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    let name = Path::new(program);
    if name.extension().is_some() {
        return None;
    }
    let pathext = pathext
        .and_then(|v| v.to_str())
        .filter(|v| !v.is_empty())
        .unwrap_or(".COM;.EXE;.BAT;.CMD");
    let with_extensions = |base: &Path| {
        pathext
            .split(';')
            .filter(|ext| !ext.is_empty())
            .map(|ext| {
                let mut file = base.as_os_str().to_owned();
                file.push(ext);
                std::path::PathBuf::from(file)
            })
            .find(|candidate| candidate.is_file())
    };
    if name.components().count() > 1 || name.is_absolute() {
        return with_extensions(name);
    }
    std::env::split_paths(path_var?).find_map(|dir| with_extensions(&dir.join(name)))
}

/// Not used on Windows: servers start without the sandbox helper (`io::child`).
pub fn read_stdin_exact(_buf: &mut [u8]) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// The signal that ended a process: none on Windows (every process has an exit code).
pub fn exit_signal(_status: ExitStatus) -> Option<i32> {
    None
}

/// Windows offers no non-blocking write on an anonymous pipe that is all-or-nothing, so
/// the proxy always queues (this type has no values).
#[derive(Debug)]
pub enum DirectPipe {}

/// No direct writes (see [`DirectPipe`]).
pub const PIPE_BUF: usize = 0;

pub fn direct_pipe(_stdin: &tokio::process::ChildStdin) -> Option<DirectPipe> {
    None
}

#[inline]
pub fn write_direct(pipe: &DirectPipe, _bytes: &[u8]) -> usize {
    match *pipe {}
}

/// Directories get their owner-only ACL from [`restrict_to_owner`], called after creation.
pub fn owner_only_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    builder
}

/// Files get their owner-only ACL from [`restrict_file_to_owner`] (or inherit it from an
/// owner-only directory). Windows links need privilege to create, and the user's
/// directories are not writable by others, so there is no `O_NOFOLLOW` equivalent here.
pub fn owner_only_nofollow(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

pub fn owner_only_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

/// Temporary files inherit the owner-only ACL of the directory they are made in (every
/// caller makes them in one, see [`restrict_to_owner`]).
pub fn owner_only_temp<'b, 'p, 's>(
    builder: &'b mut tempfile::Builder<'p, 's>,
) -> &'b mut tempfile::Builder<'p, 's> {
    builder
}

pub fn nofollow(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

/// Give `path` a protected DACL (nothing inherited from its parent) with one entry: full
/// control for the current user, inherited by what a directory later holds. The
/// equivalent of mode 0600 / 0700.
pub fn restrict_to_owner(path: &Path) -> io::Result<()> {
    let mut acl = OwnerOnlyAcl::new(path.is_dir())?;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    // SAFETY: a NUL-terminated path and a valid ACL; owner, group and SACL unchanged.
    let err = unsafe {
        SetNamedSecurityInfoW(
            wide.as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            acl.as_mut_ptr(),
            std::ptr::null(),
        )
    };
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err as i32));
    }
    Ok(())
}

/// [`restrict_to_owner`] for a file already open (by its name: our handle may not carry
/// the right to change its ACL).
pub fn restrict_file_to_owner(_file: &File, path: &Path) -> io::Result<()> {
    restrict_to_owner(path)
}

/// `ACE_HEADER::AceType` of an access-allowed entry (in windows-sys's SystemServices,
/// a large module for one constant).
const ACCESS_ALLOWED_ACE_TYPE: u32 = 0;

/// A DACL with one entry: full control for the current user (inherited by what a
/// directory holds, for a directory's).
struct OwnerOnlyAcl {
    /// u32 elements: an ACL must be 4-byte aligned.
    buf: Vec<u32>,
}

impl OwnerOnlyAcl {
    fn new(for_directory: bool) -> io::Result<OwnerOnlyAcl> {
        let user = current_user()?;
        let sid = user_sid(&user);
        // SAFETY: a valid SID.
        let sid_len = unsafe { GetLengthSid(sid) } as usize;
        let acl_len =
            size_of::<ACL>() + size_of::<ACCESS_ALLOWED_ACE>() - size_of::<u32>() + sid_len;
        let mut acl = OwnerOnlyAcl {
            buf: vec![0u32; acl_len.div_ceil(4)],
        };
        // SAFETY: `buf` has `acl_len` bytes or more.
        check(unsafe { InitializeAcl(acl.as_mut_ptr(), acl_len as u32, ACL_REVISION) })?;
        let inherit = if for_directory {
            SUB_CONTAINERS_AND_OBJECTS_INHERIT
        } else {
            0
        };
        // SAFETY: an initialised ACL with room for this one entry, and a valid SID (the
        // entry copies it).
        check(unsafe {
            AddAccessAllowedAceEx(
                acl.as_mut_ptr(),
                ACL_REVISION,
                inherit,
                FILE_ALL_ACCESS,
                sid,
            )
        })?;
        Ok(acl)
    }

    fn as_mut_ptr(&mut self) -> *mut ACL {
        self.buf.as_mut_ptr().cast()
    }
}

/// Who a DACL lets in, as read back from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DaclReadBack {
    /// Entries allowing the current user.
    user: usize,
    /// Entries allowing Everyone (the World SID).
    everyone: usize,
    /// Any other entries (other SIDs, deny or audit entries).
    other: usize,
    /// Whether the DACL is protected from inheriting its parent's entries.
    protected: bool,
}

/// Whether `path`'s DACL lets in the current user alone: what [`restrict_to_owner`] sets,
/// or inherits from an owner-only directory. For tests.
pub fn is_owner_only(path: &Path) -> io::Result<bool> {
    let acl = read_back_dacl(path)?;
    Ok(acl.user > 0 && acl.everyone == 0 && acl.other == 0)
}

/// The DACL of `path`, summarised ([`DaclReadBack`]).
fn read_back_dacl(path: &Path) -> io::Result<DaclReadBack> {
    use windows_sys::Win32::Foundation::LocalFree;
    use windows_sys::Win32::Security::Authorization::GetNamedSecurityInfoW;
    use windows_sys::Win32::Security::{
        GetSecurityDescriptorControl, PSECURITY_DESCRIPTOR, SE_DACL_PROTECTED,
    };
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path and out pointers; `descriptor` is freed below.
    let err = unsafe {
        GetNamedSecurityInfoW(
            wide.as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut descriptor,
        )
    };
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err as i32));
    }
    let mut control = 0u16;
    let mut revision = 0u32;
    // SAFETY: `descriptor` is valid until freed below.
    let protected =
        unsafe { GetSecurityDescriptorControl(descriptor, &mut control, &mut revision) } != 0
            && control & SE_DACL_PROTECTED != 0;
    // A null DACL lets everyone in.
    let read = if dacl.is_null() {
        Ok(DaclReadBack {
            user: 0,
            everyone: 1,
            other: 0,
            protected,
        })
    } else {
        // SAFETY: `dacl` points into `descriptor`, valid until freed below.
        unsafe { summarise(dacl) }.map(|mut r| {
            r.protected = protected;
            r
        })
    };
    // SAFETY: allocated by GetNamedSecurityInfoW, freed once.
    unsafe { LocalFree(descriptor) };
    read
}

/// Count `dacl`'s entries by whom they allow.
///
/// # Safety
/// `dacl` must point to a valid ACL.
unsafe fn summarise(dacl: *const ACL) -> io::Result<DaclReadBack> {
    use windows_sys::Win32::Security::{EqualSid, GetAce, IsWellKnownSid, WinWorldSid};
    let user = current_user()?;
    let sid = user_sid(&user);
    let mut read = DaclReadBack {
        user: 0,
        everyone: 0,
        other: 0,
        protected: false,
    };
    // SAFETY: the caller's promise.
    let count = unsafe { (*dacl).AceCount };
    for i in 0..u32::from(count) {
        let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
        // SAFETY: a valid ACL and an index below its count; the entry points into it.
        unsafe {
            if GetAce(dacl, i, &mut ace) == 0 {
                return Err(io::Error::last_os_error());
            }
            let allowed = ace.cast::<ACCESS_ALLOWED_ACE>();
            if u32::from((*allowed).Header.AceType) != ACCESS_ALLOWED_ACE_TYPE {
                read.other += 1;
                continue;
            }
            let ace_sid = (&raw mut (*allowed).SidStart).cast();
            if EqualSid(ace_sid, sid) != 0 {
                read.user += 1;
            } else if IsWellKnownSid(ace_sid, WinWorldSid) != 0 {
                read.everyone += 1;
            } else {
                read.other += 1;
            }
        }
    }
    Ok(read)
}

/// The SID inside a [`current_user`] buffer.
fn user_sid(user: &[usize]) -> windows_sys::Win32::Security::PSID {
    // SAFETY: `user` holds a TOKEN_USER written by GetTokenInformation; its SID points
    // into the same buffer, which the caller keeps alive while using the SID.
    unsafe { (*user.as_ptr().cast::<TOKEN_USER>()).User.Sid }
}

/// Whether this process runs under Wine (ntdll exports `wine_get_version`), whose file
/// security keeps a DACL only as the Unix mode bits it maps to. For tests.
#[cfg(test)]
pub fn running_under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: NUL-terminated names; ntdll is loaded in every process.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

/// Assert that `path` is owner-only: its DACL, read back, lets in the current user alone.
///
/// Not under Wine (8.0): it keeps no DACL for a file, only Unix mode bits, and it leaves
/// even those unchanged for a DACL set with `PROTECTED_DACL_SECURITY_INFORMATION`, as
/// [`restrict_to_owner`] sets it (seen here: the read-back DACL still allows Everyone).
/// There the read-back is only checked to work and to show the user's access, and that
/// is said on stderr; the ACL itself is checked in memory by
/// `tests::the_owner_only_acl_allows_the_user_alone`. For tests.
#[cfg(test)]
pub fn assert_owner_only(path: &Path) {
    let read = read_back_dacl(path).unwrap();
    if running_under_wine() {
        eprintln!(
            "note: under Wine, which keeps no DACL for a file: not checking that {} is owner-only (read back: {read:?})",
            path.display()
        );
        assert!(read.user > 0, "{path:?}: {read:?}");
    } else {
        assert!(
            read.user > 0 && read.everyone == 0 && read.other == 0,
            "{path:?} is not owner-only: {read:?}"
        );
    }
}

/// The current user's TOKEN_USER, in a buffer aligned for it.
fn current_user() -> io::Result<Vec<usize>> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo-handle of this process and an out pointer.
    check(unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) })?;
    // SAFETY: a new, valid handle that nothing else owns.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    let mut needed = 0u32;
    // SAFETY: asks for the size only (null buffer, zero length).
    unsafe {
        GetTokenInformation(
            token.as_raw_handle() as HANDLE,
            TokenUser,
            std::ptr::null_mut(),
            0,
            &mut needed,
        )
    };
    let mut buf = vec![0usize; (needed as usize).div_ceil(size_of::<usize>()).max(1)];
    // SAFETY: `buf` has `needed` bytes or more.
    check(unsafe {
        GetTokenInformation(
            token.as_raw_handle() as HANDLE,
            TokenUser,
            buf.as_mut_ptr().cast(),
            (buf.len() * size_of::<usize>()) as u32,
            &mut needed,
        )
    })?;
    Ok(buf)
}

/// Where [`lock_exclusive`] locks: one byte far past any real file's end. A Windows lock
/// is mandatory for the range it covers, so a lock on the data would fail every other
/// process's reads (`mcpwall log -f` following the audit log); a byte nobody reads or
/// writes serialises the lockers alone, as `flock` does on Unix.
const LOCK_OFFSET: u64 = u64::MAX - 1;

/// Take an exclusive lock on `file` (`LockFileEx` on a byte past the data, see
/// [`LOCK_OFFSET`]), waiting for another holder. Released by [`unlock`] or when the file
/// is closed (also when the process dies).
pub fn lock_exclusive(file: &File) -> io::Result<()> {
    use windows_sys::Win32::Storage::FileSystem::{LOCKFILE_EXCLUSIVE_LOCK, LockFileEx};
    let mut at = lock_range();
    // SAFETY: a valid file handle, a zeroed-then-filled OVERLAPPED that lives across the
    // call; the handle is synchronous, so the call returns when the lock is held.
    check(unsafe {
        LockFileEx(
            file.as_raw_handle() as HANDLE,
            LOCKFILE_EXCLUSIVE_LOCK,
            0,
            1,
            0,
            &mut at,
        )
    })
}

/// Release [`lock_exclusive`]'s lock.
pub fn unlock(file: &File) -> io::Result<()> {
    use windows_sys::Win32::Storage::FileSystem::UnlockFileEx;
    let mut at = lock_range();
    // SAFETY: as in `lock_exclusive`.
    check(unsafe { UnlockFileEx(file.as_raw_handle() as HANDLE, 0, 1, 0, &mut at) })
}

fn lock_range() -> windows_sys::Win32::System::IO::OVERLAPPED {
    // SAFETY: plain data, valid when zeroed.
    let mut at: windows_sys::Win32::System::IO::OVERLAPPED = unsafe { std::mem::zeroed() };
    at.Anonymous.Anonymous.Offset = LOCK_OFFSET as u32;
    at.Anonymous.Anonymous.OffsetHigh = (LOCK_OFFSET >> 32) as u32;
    at
}

/// Read into `buf` from `offset`. Unlike `pread` this moves the file position, which
/// mcpwall's callers never rely on (they append, or read and write at given offsets).
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// Write all of `buf` at `offset`, on a file not opened for appending (see [`read_at`]).
pub fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether a lock failed because the file system has none.
pub fn lock_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}

/// Whether two files are the same: Windows gives no file id through std's stable API, so
/// this cannot tell; callers then rely on the compare-and-swap of the contents.
pub fn same_file(_a: &std::fs::Metadata, _b: &std::fs::Metadata) -> bool {
    true
}

/// How long [`replace`] keeps trying while another program holds the target open
/// without sharing its deletion (an editor or a client reading its config).
const REPLACE_PATIENCE: Duration = Duration::from_secs(3);

/// Replace `target` by `temp` (`MoveFileEx` with `MOVEFILE_REPLACE_EXISTING`, through
/// std), retrying while the target is held open.
pub fn replace(temp: &Path, target: &Path) -> io::Result<()> {
    let deadline = Instant::now() + REPLACE_PATIENCE;
    let mut pause = Duration::from_millis(5);
    loop {
        match std::fs::rename(temp, target) {
            Ok(()) => return Ok(()),
            Err(e) if is_held_open(&e) && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_held_open(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(|c| c as u32),
        Some(ERROR_SHARING_VIOLATION | ERROR_ACCESS_DENIED | ERROR_LOCK_VIOLATION)
    )
}

/// Nobody runs as root on Windows in the Unix sense: an elevated administrator writing a
/// user's file leaves its ACL as it was.
pub fn is_root() -> bool {
    false
}

/// Windows makes a rename durable with the file's own flush; directories cannot be opened
/// for flushing through std.
pub fn fsync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// No atomic exchange of two names on Windows: the caller falls back to [`replace`].
pub fn exchange(_a: &Path, _b: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Whether process `pid` is still running. A process we may not open (access denied)
/// exists; one that has exited but whose handle someone still holds does not. A reused
/// pid reads as running.
pub fn process_exists(pid: u32) -> bool {
    // The exit code `GetExitCodeProcess` reports for a process that has not exited.
    const STILL_ACTIVE: u32 = 259;
    // SAFETY: OpenProcess takes no pointers; a null result is handled below.
    let raw = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if raw.is_null() {
        return io::Error::last_os_error().raw_os_error() == Some(ERROR_ACCESS_DENIED as i32);
    }
    // SAFETY: a fresh handle that nothing else owns; OwnedHandle closes it.
    let process = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut code = 0u32;
    // SAFETY: a valid process handle and a pointer to a u32.
    let ok = unsafe { GetExitCodeProcess(process.as_raw_handle() as HANDLE, &mut code) };
    ok == 0 || code == STILL_ACTIVE
}

fn check(ok: windows_sys::core::BOOL) -> io::Result<()> {
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The long form of the existing path `path` (`/` or `\\` separators): each 8.3 short
/// name in it (`SSH~1`, `ID_ED2~1`) replaced by the name it stands for, with `/`
/// separators; `None` when the path does not exist or cannot be read. Needs only the
/// right to list its directories, not to open the file (as `canonicalize` does).
pub fn long_path_name(path: &str) -> Option<String> {
    use windows_sys::Win32::Storage::FileSystem::GetLongPathNameW;
    let wide: Vec<u16> = path
        .encode_utf16()
        .map(|c| {
            if c == u16::from(b'/') {
                u16::from(b'\\')
            } else {
                c
            }
        })
        .chain([0])
        .collect();
    let mut long = vec![0u16; 260];
    // Once to learn the size a long path needs, then with that size; a third time only
    // if the path grew in between.
    for _ in 0..3 {
        let room = u32::try_from(long.len()).ok()?;
        // SAFETY: `wide` is NUL-terminated; `long` has room for `room` UTF-16 units, the
        // size we pass, and the call writes no more than that.
        let n = unsafe { GetLongPathNameW(wide.as_ptr(), long.as_mut_ptr(), room) } as usize;
        if n == 0 {
            return None;
        }
        if n < long.len() {
            // Success: `n` units written, without the NUL.
            long.truncate(n);
            return Some(String::from_utf16(&long).ok()?.replace('\\', "/"));
        }
        // Too small: `n` is the size needed, NUL included.
        long.resize(n, 0);
    }
    None
}

/// The 8.3 short form of the existing path `path`, where the file system gives one. For
/// tests of [`long_path_name`].
#[cfg(test)]
pub fn short_path_name(path: &str) -> Option<String> {
    use windows_sys::Win32::Storage::FileSystem::GetShortPathNameW;
    let wide: Vec<u16> = path.encode_utf16().chain([0]).collect();
    let mut short = vec![0u16; 1024];
    // SAFETY: `wide` is NUL-terminated; `short` has room for the 1024 units we pass.
    let n = unsafe { GetShortPathNameW(wide.as_ptr(), short.as_mut_ptr(), 1024) } as usize;
    if n == 0 || n >= short.len() {
        return None;
    }
    short.truncate(n);
    Some(String::from_utf16(&short).ok()?.replace('\\', "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live process exists; one that has exited does not (the holder check behind
    /// `mcpwall approve`).
    #[test]
    fn an_exited_process_no_longer_exists() {
        assert!(process_exists(std::process::id()));
        let mut child = std::process::Command::new("cmd.exe")
            .args(["/c", "exit 0"])
            .spawn()
            .unwrap();
        let pid = child.id();
        child.wait().unwrap();
        drop(child);
        assert!(!process_exists(pid));
    }

    /// Ending the Job ends the server and what it started, and the Job is then empty.
    #[test]
    fn a_killed_tree_ends_whole() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // cmd starts a second cmd that would wait 30 s: both must go.
            let mut command = tokio::process::Command::new("cmd.exe");
            command.args([
                "/c",
                "start /b cmd /c ping -n 30 127.0.0.1 >NUL & ping -n 30 127.0.0.1 >NUL",
            ]);
            command
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null());
            ProcessTree::prepare(&mut command);
            let mut child = command.spawn().unwrap();
            let tree = ProcessTree::adopt(&child).unwrap();
            assert!(tree.exists());
            tree.signal(SIGKILL).unwrap();
            let status = child.wait().await.unwrap();
            assert_eq!(status.code(), Some(KILLED_EXIT_CODE as i32));
            let deadline = Instant::now() + Duration::from_secs(10);
            while tree.exists() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(!tree.exists(), "a process of the tree outlived the Job");
        });
    }

    /// `npx` in a client's config is npm's `npx.cmd` shim: found on PATH by PATHEXT, and
    /// it runs.
    #[test]
    fn cmd_shims_are_found_and_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shim.cmd"), "@echo shim ran %1\r\n").unwrap();
        let path_var = std::env::join_paths([Path::new("C:\\nowhere"), dir.path()]).unwrap();
        let found = find_program("shim".as_ref(), Some(&path_var), Some(".EXE;.cmd".as_ref()));
        assert_eq!(
            found.as_deref(),
            Some(dir.path().join("shim.cmd").as_path())
        );
        assert_eq!(
            find_program("shim.exe".as_ref(), Some(&path_var), None),
            None
        );
        assert_eq!(find_program("absent".as_ref(), Some(&path_var), None), None);
        let direct = dir.path().join("shim");
        // The default PATHEXT spells `.CMD`; the file system ignores case.
        let direct_found = find_program(direct.as_os_str(), None, None).unwrap();
        let want = dir.path().join("shim.cmd");
        assert!(
            direct_found
                .to_string_lossy()
                .eq_ignore_ascii_case(&want.to_string_lossy())
        );
        let out = std::process::Command::new(found.unwrap())
            .arg("hello")
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("shim ran hello"),
            "{out:?}"
        );
    }

    #[test]
    fn replace_overwrites_and_owner_only_applies() {
        let dir = tempfile::tempdir().unwrap();
        let (temp, target) = (dir.path().join("t"), dir.path().join("c.json"));
        std::fs::write(&target, "old").unwrap();
        std::fs::write(&temp, "new").unwrap();
        replace(&temp, &target).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert!(!temp.exists());
        let before = read_back_dacl(&target).unwrap();
        assert!(before.everyone > 0 || before.other > 0, "{before:?}");
        restrict_to_owner(dir.path()).unwrap();
        restrict_to_owner(&target).unwrap();
        assert_owner_only(dir.path());
        assert_owner_only(&target);
        if !running_under_wine() {
            assert!(read_back_dacl(&target).unwrap().protected);
            // A file made later in the directory inherits the owner-only entry.
            let later = dir.path().join("later");
            std::fs::write(&later, "x").unwrap();
            assert_owner_only(&later);
        }
        // Still ours to read and write after the ACL change.
        std::fs::write(&target, "again").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "again");
    }

    /// The DACL `restrict_to_owner` applies holds one entry, allowing the current user
    /// full control, inherited by a directory's contents. Checked in memory, so it holds
    /// under Wine too, whose file security does not keep a DACL to read back.
    #[test]
    fn the_owner_only_acl_allows_the_user_alone() {
        use windows_sys::Win32::Security::{GetAce, IsValidAcl};
        for for_directory in [false, true] {
            let mut acl = OwnerOnlyAcl::new(for_directory).unwrap();
            // SAFETY: a valid ACL, built above and alive for this block.
            unsafe {
                assert_ne!(IsValidAcl(acl.as_mut_ptr()), 0);
                let read = summarise(acl.as_mut_ptr()).unwrap();
                assert_eq!(
                    (read.user, read.everyone, read.other),
                    (1, 0, 0),
                    "{read:?}"
                );
                let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
                assert_ne!(GetAce(acl.as_mut_ptr(), 0, &mut ace), 0);
                let ace = &*ace.cast::<ACCESS_ALLOWED_ACE>();
                assert_eq!(ace.Mask, FILE_ALL_ACCESS);
                let inherit = if for_directory {
                    SUB_CONTAINERS_AND_OBJECTS_INHERIT as u8
                } else {
                    0
                };
                assert_eq!(ace.Header.AceFlags, inherit);
            }
        }
    }
}
