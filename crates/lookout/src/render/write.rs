//! A rendered file written atomically and only when its text changed: a
//! temporary file in DEST's own folder (so the rename stays on one file
//! system), DEST's mode given to it, synced, then renamed over DEST. A
//! reader (nginx reloading) sees the old file or the new one, never half.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Writes `text` to `dest` unless `dest` holds it already: `Ok(true)` when
/// written.
pub fn write_if_changed(dest: &Path, text: &str) -> io::Result<bool> {
    let mode = match fs::read(dest) {
        Ok(held) if held == text.as_bytes() => return Ok(false),
        Ok(_) => fs::metadata(dest).ok().map(|m| m.permissions().mode()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let temp = temp_path(dest);
    let written = (|| {
        let mut file = fs::File::create(&temp)?;
        if let Some(mode) = mode {
            file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temp, dest)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map(|()| true)
}

/// `DEST`'s folder, `.NAME.lookout-PID.tmp`.
fn temp_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map_or_else(|| "render".into(), |n| n.to_string_lossy().into_owned());
    let temp = format!(".{name}.lookout-{}.tmp", std::process::id());
    match dest.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder.join(temp),
        _ => PathBuf::from(temp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_only_a_change_and_keeps_the_mode() {
        let dir = std::env::temp_dir().join(format!("lookout-write-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("a temp folder");
        let dest = dir.join("out.conf");
        let _ = fs::remove_file(&dest);
        assert!(write_if_changed(&dest, "a\n").expect("written"));
        assert!(!write_if_changed(&dest, "a\n").expect("read"), "unchanged");
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o640)).expect("chmod");
        assert!(write_if_changed(&dest, "b\n").expect("written"));
        assert_eq!(fs::read_to_string(&dest).expect("read"), "b\n");
        let mode = fs::metadata(&dest).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        let left: Vec<_> = fs::read_dir(&dir)
            .expect("listed")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "no temporary file left: {left:?}");
        let _ = fs::remove_dir_all(&dir);
    }
}
