//! Writing client files safely: a timestamped backup first, then temp file + rename with
//! the original permissions, refusing to write over a file that changed since it was read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A write that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Reading, backing up or writing failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// To which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Someone (usually the client itself) wrote the file between our read and our write.
    #[error("{0} changed while mcpwall was editing it; nothing was written. Run the command again")]
    Changed(PathBuf),
}

fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> WriteError + 'p {
    move |source| WriteError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// UTC time as `20261129T225400Z`, for backup names.
pub fn timestamp(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's civil_from_days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Copy `file` into `backup_dir` as `<path with / turned into _>.<timestamp>` and return
/// the backup's path. Backups live under `~/.mcpwall/backups`, not beside the file, so a
/// project's `.mcp.json` does not gain stray files in the repository.
pub fn backup(file: &Path, backup_dir: &Path) -> Result<PathBuf, WriteError> {
    std::fs::create_dir_all(backup_dir).map_err(io("create", backup_dir))?;
    let flat: String = file
        .to_string_lossy()
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let flat = flat.trim_start_matches('_');
    let stamp = timestamp(SystemTime::now());
    let mut target = backup_dir.join(format!("{flat}.{stamp}"));
    let mut n = 1;
    while target.exists() {
        n += 1;
        target = backup_dir.join(format!("{flat}.{stamp}.{n}"));
    }
    std::fs::copy(file, &target).map_err(io("back up", file))?;
    Ok(target)
}

/// Replace `file`'s contents with `new`, atomically, keeping its permissions, provided it
/// still holds `expected` (what the edit was computed from). A symlinked file is written
/// through the link so dotfile managers keep working. A missing file is created (mode
/// 0600 on Unix, as these files may hold tokens in `env`).
pub fn write_atomic(file: &Path, expected: Option<&str>, new: &str) -> Result<(), WriteError> {
    let target = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let current = match std::fs::read_to_string(&target) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("read", file)(e)),
    };
    if current.as_deref() != expected {
        return Err(WriteError::Changed(file.to_path_buf()));
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.mcpwall-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&temp).map_err(io("create", &temp))?;
        f.write_all(new.as_bytes()).map_err(io("write", &temp))?;
        f.sync_all().map_err(io("write", &temp))?;
        let permissions = match std::fs::metadata(&target) {
            Ok(meta) => meta.permissions(),
            Err(_) => private_permissions(f.metadata().map_err(io("read", &temp))?),
        };
        std::fs::set_permissions(&temp, permissions).map_err(io("set permissions of", &temp))?;
        std::fs::rename(&temp, &target).map_err(io("replace", file))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(unix)]
fn private_permissions(meta: std::fs::Metadata) -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    let mut p = meta.permissions();
    p.set_mode(0o600);
    p
}

#[cfg(not(unix))]
fn private_permissions(meta: std::fs::Metadata) -> std::fs::Permissions {
    meta.permissions()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_796_079_240);
        assert_eq!(timestamp(t), "20261130T225400Z");
        assert_eq!(timestamp(UNIX_EPOCH), "19700101T000000Z");
        let leap = UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        assert_eq!(timestamp(leap), "20000229T000000Z");
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_keeps_mode_and_refuses_stale_reads() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.json");
        std::fs::write(&file, "{}").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&file, Some("{}"), "{ }").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ }");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert!(matches!(
            write_atomic(&file, Some("{}"), "[]"),
            Err(WriteError::Changed(_))
        ));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ }");
        let backup = backup(&file, &dir.path().join("b")).unwrap();
        assert_eq!(std::fs::read_to_string(backup).unwrap(), "{ }");
    }
}
