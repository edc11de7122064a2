//! Every relative link of the documentation lands somewhere: in README.md and
//! each docs/**/*.md, a link `[text](target)` outside code names a file or
//! directory of the repository, and its `#anchor`, when the target is a
//! Markdown page, is a heading of that page (GitHub's slug, `-1`, `-2` for
//! repeated headings) or an `<a id="...">` in it. Links with a scheme
//! (`https:`, `mailto:`) are not followed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use katalog_tests::{Scratch, repo};

/// The anchors a page defines and the links it holds (line, target).
struct Page {
    anchors: HashSet<String>,
    links: Vec<(usize, String)>,
}

/// GitHub's anchor for a heading: the text as rendered (a link's text, not its
/// target), lower-cased, without punctuation, spaces as `-`.
fn slug(heading: &str) -> String {
    strip_link_targets(heading)
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `[text](target)` becomes `text`.
fn strip_link_targets(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..at]);
        rest = &rest[at + 2..];
        rest = rest.find(')').map_or("", |end| &rest[end + 1..]);
    }
    out.push_str(rest);
    out
}

/// The line without its inline code spans (`` `[a](b)` `` is not a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let fence = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        rest = after.find(fence).map_or("", |end| &after[end + ticks..]);
    }
    out.push_str(rest);
    out
}

fn read_page(text: &str) -> Page {
    let mut anchors = HashSet::new();
    let mut repeats: HashMap<String, usize> = HashMap::new();
    let mut links = Vec::new();
    let mut fence: Option<&str> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m)) {
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                open => open,
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        for attribute in ["<a id=\"", "<a name=\""] {
            for (at, _) in line.match_indices(attribute) {
                let rest = &line[at + attribute.len()..];
                if let Some(end) = rest.find('"') {
                    anchors.insert(rest[..end].to_string());
                }
            }
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let anchor = slug(&line[hashes + 1..]);
            let seen = repeats.entry(anchor.clone()).or_insert(0);
            anchors.insert(match *seen {
                0 => anchor,
                n => format!("{anchor}-{n}"),
            });
            *seen += 1;
        }
        let code_free = without_code_spans(line);
        let mut rest = code_free.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            links.push((number + 1, target.to_string()));
            rest = &rest[end..];
        }
    }
    Page { anchors, links }
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken link of the pages (paths relative to `root`), as
/// `page:line: target: why`.
fn broken_links(root: &Path, pages: &[PathBuf]) -> Vec<String> {
    let mut cache: BTreeMap<PathBuf, Page> = BTreeMap::new();
    let mut read = |path: &Path| -> Option<HashSet<String>> {
        if !cache.contains_key(path) {
            let text = std::fs::read_to_string(root.join(path)).ok()?;
            cache.insert(path.to_path_buf(), read_page(&text));
        }
        Some(cache[path].anchors.clone())
    };
    let mut broken = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(root.join(page)).expect("a page of the docs");
        for (line, target) in read_page(&text).links {
            let has_scheme = target.split_once(':').is_some_and(|(scheme, _)| {
                !scheme.is_empty()
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
            });
            if has_scheme || target.starts_with('/') {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                page.clone()
            } else {
                normalise(&page.parent().unwrap_or(Path::new("")).join(path))
            };
            let at = format!("{}:{line}: {target}", page.display());
            if !root.join(&resolved).exists() {
                broken.push(format!("{at}: no such file"));
            } else if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                match read(&resolved) {
                    Some(anchors) if anchors.contains(anchor) => {}
                    Some(_) => broken.push(format!("{at}: no such heading or anchor")),
                    None => broken.push(format!("{at}: unreadable")),
                }
            }
        }
    }
    broken
}

/// README.md and every Markdown page under docs/, relative to `root`.
fn doc_pages(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
            .expect("a docs directory")
            .map(|e| e.expect("a directory entry").file_name())
            .collect();
        entries.sort();
        for name in entries {
            let path = dir.join(name);
            if root.join(&path).is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut pages = vec![PathBuf::from("README.md")];
    walk(root, Path::new("docs"), &mut pages);
    pages
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = repo();
    let pages = doc_pages(&root);
    assert!(
        pages.iter().any(|p| p.starts_with("docs/reference")),
        "the reference's chapters are read: {pages:?}"
    );
    let broken = broken_links(&root, &pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_missing_page_or_anchor_is_reported_and_code_is_not_read() {
    let dir = Scratch::new("docs-links");
    std::fs::create_dir_all(dir.path("docs/reference")).expect("docs/reference");
    let files = [
        ("README.md", "See [the guide](docs/guide.md#a-b-c).\n"),
        (
            "docs/guide.md",
            "# Guide\n\n## A, `b` — c\n\n## A, `b` — c\n\n<a id=\"kept\"></a>\n\
             [ok](#a-b--c-1) [ok](reference/x.md#top) [ok](#kept) [ok](https://example.com/#x)\n\
             [missing](reference/y.md) [no anchor](reference/x.md#nowhere) [twice](#a-b--c-2)\n\
             `[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n",
        ),
        (
            "docs/reference/x.md",
            "# Top\n\n[up](../guide.md#guide) [up](../../README.md)\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.path(name), text).expect("a page");
    }
    let root = dir.path("");
    let broken = broken_links(&root, &doc_pages(&root));
    assert_eq!(
        broken,
        [
            "README.md:1: docs/guide.md#a-b-c: no such heading or anchor",
            "docs/guide.md:9: reference/y.md: no such file",
            "docs/guide.md:9: reference/x.md#nowhere: no such heading or anchor",
            "docs/guide.md:9: #a-b--c-2: no such heading or anchor",
        ]
    );
}
