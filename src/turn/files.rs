//! `files` attachments: each path resolves inside the working directory (after following
//! symlinks); text files are read (with an optional line range) into the prompt, images go to
//! codex's `--image`. Errors name the entry (`files[2]`) and never echo file contents.

use std::path::Path;

use crate::confine;
use crate::error::{Error, Result};
use crate::security::paths::{self, Confined, Kind};
use crate::security::prompt::Prompt;

/// Most files per call.
pub const MAX_FILES: usize = 20;
/// Largest text file attached (the reference bridge's 1 MB).
pub const MAX_TEXT_BYTES: u64 = 1024 * 1024;
/// Largest image attached (the reference bridge's 5 MB).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Extensions sent as images.
pub const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

/// What the attachments add to a turn.
#[derive(Debug, Default)]
pub struct Attachments {
    /// Appended to the prompt.
    pub text: String,
    pub images: Vec<Confined>,
}

fn is_image(path: &str) -> bool {
    Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Resolve and read `files` relative to the working directory `cwd`.
pub fn attach(files: &[String], cwd: &Confined) -> Result<Attachments> {
    if files.len() > MAX_FILES {
        return Err(Error::invalid(
            "files",
            format!("at most {MAX_FILES} files per call"),
        ));
    }
    let mut out = Attachments::default();
    let within = &[cwd.path().to_path_buf()];
    for (i, raw) in files.iter().enumerate() {
        let field = format!("files[{i}]");
        let fref = paths::parse_file_ref(&field, raw)?;
        if is_image(&fref.path) {
            if fref.lines.is_some() {
                return Err(Error::invalid(
                    &field,
                    "a line range makes no sense for an image",
                ));
            }
            let c = confine::resolve(&field, &fref.path, cwd.path(), within, Kind::Image)?;
            let size = std::fs::metadata(c.path())
                .map(|m| m.len())
                .unwrap_or(u64::MAX);
            if size > MAX_IMAGE_BYTES {
                return Err(Error::invalid(
                    &field,
                    format!("is larger than {MAX_IMAGE_BYTES} bytes"),
                ));
            }
            out.images.push(c);
            continue;
        }
        let c = confine::resolve(&field, &fref.path, cwd.path(), within, Kind::File)?;
        let size = std::fs::metadata(c.path())
            .map(|m| m.len())
            .unwrap_or(u64::MAX);
        if size > MAX_TEXT_BYTES {
            return Err(Error::invalid(
                &field,
                format!("is larger than {MAX_TEXT_BYTES} bytes"),
            ));
        }
        let bytes =
            std::fs::read(c.path()).map_err(|_| Error::invalid(&field, "cannot be read"))?;
        let text =
            String::from_utf8(bytes).map_err(|_| Error::invalid(&field, "is not UTF-8 text"))?;
        let shown = c
            .path()
            .strip_prefix(cwd.path())
            .unwrap_or(c.path())
            .display()
            .to_string();
        let (body, range) = match fref.lines {
            None => (text, String::new()),
            Some((start, end)) => {
                let lines: Vec<&str> = text.lines().collect();
                if start > lines.len() {
                    return Err(Error::invalid(
                        &field,
                        format!("starts past the end of the file ({} lines)", lines.len()),
                    ));
                }
                let end = end.min(lines.len());
                (
                    lines[start - 1..end].join("\n"),
                    format!(" lines=\"{start}-{end}\""),
                )
            }
        };
        out.text.push_str(&format!(
            "\n\n<file path=\"{shown}\"{range}>\n{body}\n</file>"
        ));
    }
    Ok(out)
}

/// A caller's prompt with its `files` attached inside `cwd`: the text appended in place (the
/// prompt is moved, never copied, on its way to codex's stdin; the whole refused as `prompt`
/// when it is then too large), the images for `--image`.
pub(crate) fn compose(
    mut prompt: Prompt,
    files: &[String],
    cwd: &Confined,
) -> Result<(Prompt, Vec<Confined>)> {
    let att = crate::turn::files::attach(files, cwd)?;
    prompt.append(&att.text)?;
    Ok((prompt, att.images))
}

/// A fresh empty directory for a `query` or `search`, confined inside itself.
pub(crate) fn scratch_dir() -> Result<(tempfile::TempDir, Confined)> {
    let dir = tempfile::Builder::new()
        .prefix("codex-mcp-bridge-")
        .tempdir()
        .map_err(Error::io("creating a scratch directory"))?;
    let canon = dir
        .path()
        .canonicalize()
        .map_err(Error::io("resolving the scratch directory"))?;
    let c = crate::confine::resolve(
        "workingDirectory",
        &canon.to_string_lossy(),
        Path::new("/"),
        std::slice::from_ref(&canon),
        Kind::Dir,
    )?;
    Ok((dir, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cwd(dir: &Path) -> Confined {
        let p = dir.canonicalize().unwrap();
        let p = p.to_str().unwrap();
        Confined::unchecked(p, p, Kind::Dir, "workingDirectory")
    }

    #[test]
    fn text_files_with_ranges_and_images_are_attached() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.rs"), "l1\nl2\nl3\nl4\n").unwrap();
        std::fs::write(d.path().join("p.png"), [0x89, b'P', b'N', b'G']).unwrap();
        let a = attach(&["a.rs:2-3".into(), "p.png".into()], &cwd(d.path())).unwrap();
        assert!(
            a.text
                .contains("<file path=\"a.rs\" lines=\"2-3\">\nl2\nl3\n</file>"),
            "{}",
            a.text
        );
        assert_eq!(a.images.len(), 1);
    }

    #[test]
    fn bad_attachments_name_the_entry_and_never_echo_contents() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("bin.dat"), [0xff, 0xfe, b'S', b'E', b'C']).unwrap();
        std::fs::write(
            d.path().join("big.txt"),
            vec![b'a'; (MAX_TEXT_BYTES + 1) as usize],
        )
        .unwrap();
        std::fs::write(d.path().join("short.txt"), "one line").unwrap();
        for (f, why) in [
            ("bin.dat", "UTF-8"),
            ("big.txt", "larger"),
            ("short.txt:5-6", "past the end"),
            ("../x.txt", "outside"),
            ("p.png:1-2", "line range"),
        ] {
            let err = attach(&["short.txt".into(), f.into()], &cwd(d.path()))
                .unwrap_err()
                .to_string();
            assert!(err.contains("files[1]") && err.contains(why), "{f}: {err}");
            assert!(!err.contains("SEC"));
        }
        let many: Vec<String> = (0..=MAX_FILES).map(|_| "short.txt".to_string()).collect();
        assert!(
            attach(&many, &cwd(d.path()))
                .unwrap_err()
                .to_string()
                .contains("`files`")
        );
    }
}
