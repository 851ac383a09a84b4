//! TEMPORARY stub of the page module (replaced by the real one at merge).
#![allow(dead_code, unused_variables)]
use std::time::Instant;

#[derive(Clone, Default)]
pub struct Pages;
pub struct PageQuestion {
    pub title: String,
    pub fields: Vec<(String, String)>,
    pub grants: String,
}
pub struct OpenPage {
    pub url: String,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageDecision {
    Approve,
    Deny,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    DeclinedInHost,
    TimedOut,
    Withdrawn,
    Decided,
}
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("too large")]
    TooLarge,
    #[error("full")]
    Full,
}
impl Pages {
    pub fn new() -> Pages {
        Pages
    }
    pub async fn open(&self, q: PageQuestion, expires: Instant) -> Result<OpenPage, PageError> {
        Err(PageError::Full)
    }
}
impl OpenPage {
    pub async fn decided(&mut self) -> PageDecision {
        std::future::pending().await
    }
    pub fn close(self, why: Closed) {}
}
