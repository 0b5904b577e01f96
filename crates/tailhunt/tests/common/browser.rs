//! Opens an HTML page in headless Chromium and answers questions about what it rendered.
//!
//! In: a page on disk (a report written by the binary, or a fixture), an optional `#fragment`,
//! and where to put the screenshot. [`open`] runs `scripts/render-report.sh`, which drives the
//! Debian `chromium` without network or sandbox and writes the PNG, the DOM after the page's
//! scripts ran and its console. Out: a [`Rendered`] with that DOM (parsed with `scraper`, queried
//! by CSS selector), every console line and the error lines among them.
//!
//! The DOM and console files are kept beside the PNG (`<png>.dom.html`, `<png>.console.txt`)
//! so a failing test can be looked into. A missing browser is an error telling to run
//! `scripts/setup.sh`: the tests fail, they do not skip (CI runs setup first).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use scraper::{ElementRef, Html, Selector};

/// Width of the screenshot in CSS pixels, as the script's default; its height is the page's.
pub const WIDTH: u32 = 1280;

/// `scripts/render-report.sh` of this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/render-report.sh")
}

/// What Chromium made of a page.
#[derive(Debug)]
pub struct Rendered {
    /// The document after its scripts ran, as HTML.
    pub dom: String,
    /// Every console message, uncaught exception and browser log entry, one per line:
    /// `LEVEL SOURCE: TEXT (URL:LINE)`, e.g. `error uncaught: TypeError: ... (file:///...:9)`.
    pub console: Vec<String>,
    /// The lines of `console` at level `error`: `console.error`, failed `console.assert`,
    /// uncaught exceptions and rejected promises, resources that failed to load.
    pub errors: Vec<String>,
    html: Html,
}

/// Renders `page` (with `#fragment` if given) and writes its screenshot to `png`.
pub fn open(page: &Path, fragment: Option<&str>, png: &Path) -> Result<Rendered, String> {
    let dom_file = beside(png, "dom.html");
    let console_file = beside(png, "console.txt");
    let target = match fragment {
        Some(f) => format!("{}#{f}", page.display()),
        None => page.display().to_string(),
    };
    let out = Command::new(script())
        .arg(&target)
        .arg(png)
        .arg("--dom")
        .arg(&dom_file)
        .arg("--console")
        .arg(&console_file)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
    if !out.status.success() {
        return Err(format!(
            "rendering {target} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let dom = read(&dom_file)?;
    let console: Vec<String> = read(&console_file)?.lines().map(String::from).collect();
    let errors = console
        .iter()
        .filter(|l| l.starts_with("error "))
        .cloned()
        .collect();
    Ok(Rendered {
        html: Html::parse_document(&dom),
        dom,
        console,
        errors,
    })
}

fn beside(png: &Path, suffix: &str) -> PathBuf {
    let mut name = png.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    png.with_file_name(name)
}

/// One element found by a selector.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Tag name, lower case (`svg`, `g`, `div`).
    pub tag: String,
    /// Its attributes.
    pub attrs: BTreeMap<String, String>,
    /// Its text and its descendants', whitespace collapsed.
    pub text: String,
}

impl Found {
    fn of(el: ElementRef<'_>) -> Found {
        Found {
            tag: el.value().name().to_string(),
            attrs: el
                .value()
                .attrs()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            text: el
                .text()
                .collect::<Vec<_>>()
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// The value of attribute `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).map(String::as_str)
    }
}

/// `tag#id.class...`, to name an element in an assertion message.
impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.tag)?;
        if let Some(id) = self.attr("id") {
            write!(f, "#{id}")?;
        }
        for class in self.attr("class").unwrap_or("").split_whitespace() {
            write!(f, ".{class}")?;
        }
        Ok(())
    }
}

/// Parses a selector written in a test; a bad one is a bug in the test, so it panics.
fn selector(css: &str) -> Selector {
    Selector::parse(css).unwrap_or_else(|e| panic!("invalid CSS selector '{css}': {e}"))
}

impl Rendered {
    /// How many elements match `css`.
    pub fn count(&self, css: &str) -> usize {
        self.html.select(&selector(css)).count()
    }

    /// The elements matching `css`, in document order.
    pub fn select(&self, css: &str) -> Vec<Found> {
        self.html.select(&selector(css)).map(Found::of).collect()
    }

    /// Each element matching `outer`, with how many of its descendants match `inner`:
    /// `within("svg.chart", ".mark")` says how many marks every chart drew.
    pub fn within(&self, outer: &str, inner: &str) -> Vec<(Found, usize)> {
        let inner = selector(inner);
        self.html
            .select(&selector(outer))
            .map(|el| (Found::of(el), el.select(&inner).count()))
            .collect()
    }
}

/// Width and height of a PNG, from its IHDR chunk.
///
/// Written here rather than taken from an image crate: the PNG signature and the IHDR chunk are
/// fixed, the first 24 bytes of every PNG (PNG specification, sections 5.2 and 11.2.2).
pub fn png_size(path: &Path) -> Result<(u32, u32), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 24 || !bytes.starts_with(SIGNATURE) || &bytes[12..16] != b"IHDR" {
        return Err(format!("{} is not a PNG", path.display()));
    }
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    Ok((be(16), be(20)))
}
