//! A caller's prompt, checked once where the tool call is parsed and carried as a [`Prompt`]
//! from there to codex's stdin (exec) or a `turn/start` (app-server): never empty, never
//! larger than [`MAX_PROMPT_BYTES`], whatever the bridge adds to it on the way (attached
//! files, a schema's instructions, a search's preamble). The text itself is never interpreted:
//! it is one value codex reads, never an argument, a flag or a config key.
//!
//! Architecture invariant: only [`Prompt::parse`] makes one, and every way of adding text to
//! one ([`Prompt::append`], [`Prompt::prefix`]) checks the size again, so a builder that is
//! handed a `Prompt` has nothing left to check.

use std::ops::Deref;

use crate::invalid::InvalidArgument;

/// Longest prompt accepted (it travels over stdin or one JSON-RPC line, so the limit is about
/// memory, not argv).
pub const MAX_PROMPT_BYTES: usize = 4 * 1024 * 1024;

/// A checked prompt, with the name of the argument it came from (`prompt`, `query`) for the
/// refusal of what is added to it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    text: String,
    field: &'static str,
}

impl Prompt {
    /// Check a caller's text for argument `field`: not empty (nor only blanks), at most
    /// [`MAX_PROMPT_BYTES`]. The text is moved in, not copied.
    pub fn parse(field: &'static str, text: String) -> Result<Self, InvalidArgument> {
        if text.trim().is_empty() {
            return Err(InvalidArgument::new(field, "must not be empty"));
        }
        let p = Prompt { text, field };
        p.fits()?;
        Ok(p)
    }

    /// Add `more` at the end (attached files, a schema's instructions, a retry's errors);
    /// refused, naming the prompt's argument, when the whole is then too large.
    pub fn append(&mut self, more: &str) -> Result<(), InvalidArgument> {
        self.check_room(more.len())?;
        self.text.push_str(more);
        Ok(())
    }

    /// Put `head` in front (a query's context, a search's preamble); refused like
    /// [`Prompt::append`].
    pub fn prefix(mut self, head: &str) -> Result<Self, InvalidArgument> {
        self.check_room(head.len())?;
        self.text.insert_str(0, head);
        Ok(self)
    }

    /// The text, moved out (into a spawn's stdin).
    pub fn into_string(self) -> String {
        self.text
    }

    /// The argument the prompt came from.
    pub fn field(&self) -> &'static str {
        self.field
    }

    fn check_room(&self, more: usize) -> Result<(), InvalidArgument> {
        if self.text.len().saturating_add(more) > MAX_PROMPT_BYTES {
            return Err(self.too_large());
        }
        Ok(())
    }

    fn fits(&self) -> Result<(), InvalidArgument> {
        if self.text.len() > MAX_PROMPT_BYTES {
            return Err(self.too_large());
        }
        Ok(())
    }

    fn too_large(&self) -> InvalidArgument {
        InvalidArgument::new(
            self.field,
            format!("is larger than {MAX_PROMPT_BYTES} bytes"),
        )
    }
}

impl Deref for Prompt {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for Prompt {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_blank_prompt_is_refused_naming_its_field() {
        for blank in ["", " ", "\n\t "] {
            let err = Prompt::parse("query", blank.into()).unwrap_err();
            assert_eq!(
                (err.field.as_str(), err.reason.as_str()),
                ("query", "must not be empty")
            );
        }
        assert_eq!(&*Prompt::parse("prompt", " x ".into()).unwrap(), " x ");
    }

    #[test]
    fn nothing_added_makes_a_prompt_larger_than_the_limit() {
        let biggest = "x".repeat(MAX_PROMPT_BYTES);
        assert!(Prompt::parse("prompt", biggest.clone()).is_ok());
        let err = Prompt::parse("prompt", format!("{biggest}x")).unwrap_err();
        assert_eq!(err.field, "prompt");
        assert!(err.reason.contains("larger than"), "{}", err.reason);
        // what the bridge adds is counted too, and a refused addition leaves the prompt as it was
        let mut p = Prompt::parse("query", "x".repeat(MAX_PROMPT_BYTES - 2)).unwrap();
        p.append("ab").unwrap();
        assert_eq!(p.append("c").unwrap_err().field, "query");
        assert_eq!(p.len(), MAX_PROMPT_BYTES);
        let p = Prompt::parse("query", "q".into()).unwrap();
        assert!(p.clone().prefix(&"h".repeat(MAX_PROMPT_BYTES - 1)).is_ok());
        let err = p.prefix(&"h".repeat(MAX_PROMPT_BYTES)).unwrap_err();
        assert_eq!(err.field, "query");
    }

    #[test]
    fn the_text_is_moved_not_copied() {
        let text = "p".repeat(1024);
        let at = text.as_ptr();
        let p = Prompt::parse("prompt", text).unwrap();
        let back = p.into_string();
        assert_eq!(back.as_ptr(), at);
    }
}
