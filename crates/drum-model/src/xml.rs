//! Stage 1 of loading: the DrumHead XML text into a raw document of elements and attributes with
//! their source positions (no meaning attached yet); the escaping the writer
//! ([`crate::Machine::to_xml`]) uses.
//!
//! Accepted shape (DRUM 2005 Fig. 4, whose printed excerpt is garbled: the attributes really sit
//! on the `<node>` tag):
//!
//! ```xml
//! <machinemodel>
//!   <node type="NETWORK" nodenum="0" name="" parent="-1"> <lbmethod lbm="HSFC" KEEP_CUTS="1"/> </node>
//!   <node type="SINGLE_COMPUTING" nodenum="2" name="mendoza" parent="0"/>
//! </machinemodel>
//! ```
//!
//! `<node>` elements may also nest (a nested node's parent is the enclosing node).

use crate::error::{Error, Location, Problem, Result};
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

/// An attribute as written in the file, with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// The attribute's name.
    pub name: String,
    /// Its (unescaped) value.
    pub value: String,
    /// Where the attribute's name starts.
    pub location: Location,
}

/// A `<node>` element before validation.
#[derive(Debug, Clone)]
pub(crate) struct RawNode {
    pub location: Location,
    pub attrs: Vec<Attribute>,
    /// Index (in document order) of the enclosing `<node>`, for the nested form.
    pub enclosing: Option<usize>,
    pub lbmethod: Option<RawLbMethod>,
}

/// An `<lbmethod>` element before validation.
#[derive(Debug, Clone)]
pub(crate) struct RawLbMethod {
    pub location: Location,
    pub attrs: Vec<Attribute>,
}

/// The whole document before validation.
#[derive(Debug, Clone)]
pub(crate) struct RawDocument {
    pub location: Location,
    pub attrs: Vec<Attribute>,
    pub nodes: Vec<RawNode>,
}

/// Byte offset → (line, column) for one source text.
pub(crate) struct LineIndex<'a> {
    file: &'a str,
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { file, text, starts }
    }

    pub fn location(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        // Count characters, stepping back to a char boundary if `offset` falls inside one.
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let column = self.text[start..end].chars().count() + 1;
        Location::new(self.file, clamp_u32(line + 1), clamp_u32(column))
    }
}

fn clamp_u32(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

fn invalid(location: Location, problem: Problem) -> Error {
    Error::Invalid { location, problem }
}

/// The first location of a file, for errors about the file as a whole.
pub(crate) fn file_start(file: &str) -> Location {
    Location::new(file, 1, 1)
}

/// Checks UTF-8, reporting the position of the first bad byte.
pub(crate) fn utf8<'b>(file: &str, bytes: &'b [u8]) -> Result<&'b str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            let good = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            Err(invalid(
                LineIndex::new(file, good).location(good.len()),
                Problem::NotUtf8,
            ))
        }
    }
}

enum Open {
    Model,
    Node(usize),
    LbMethod,
}

impl Open {
    fn name(&self) -> &'static str {
        match self {
            Open::Model => "machinemodel",
            Open::Node(_) => "node",
            Open::LbMethod => "lbmethod",
        }
    }
}

/// Parses `text` into a raw document. Errors carry `file`'s positions.
pub(crate) fn parse(file: &str, text: &str) -> Result<RawDocument> {
    let mut reader = Reader::from_str(text);
    {
        let config = reader.config_mut();
        config.trim_text(false);
        config.expand_empty_elements = false;
        config.check_end_names = true;
    }
    let mut tree = Tree {
        index: LineIndex::new(file, text),
        doc: None,
        stack: Vec::new(),
        done: false,
    };
    loop {
        let start = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = match reader.read_event() {
            Ok(e) => e,
            Err(e) => {
                let at = usize::try_from(reader.error_position()).unwrap_or(usize::MAX);
                return Err(invalid(
                    tree.index.location(at),
                    Problem::NotWellFormed(e.to_string()),
                ));
            }
        };
        // Skip the whitespace that may precede '<' in the position we took.
        let tag_at = start
            + text
                .get(start..)
                .map_or(0, |s| s.len() - s.trim_start().len());
        let here = tree.index.location(tag_at);
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                let attrs = attributes(&tree.index, &reader, e, tag_at)?;
                let tag = Tag {
                    name,
                    here,
                    attrs,
                    empty,
                };
                match tree.stack.last() {
                    None => tree.root(tag)?,
                    Some(_) => tree.child(tag)?,
                }
            }
            Event::End(_) => {
                tree.stack.pop();
                if tree.stack.is_empty() {
                    tree.done = true;
                }
            }
            Event::Text(ref t) => no_text(&tree.index, t.as_ref(), start)?,
            Event::CData(_) => {
                return Err(invalid(
                    here,
                    Problem::TextContent("<![CDATA[...]]>".into()),
                ));
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            Event::Eof => return tree.finish(file, text.len()),
        }
    }
}

/// A start tag (`empty`: it closes itself) at `here`.
struct Tag {
    name: String,
    here: Location,
    attrs: Vec<Attribute>,
    empty: bool,
}

/// The document as [`parse`] builds it, event by event: the elements so far, the open ones,
/// and whether the document element was closed.
struct Tree<'a> {
    index: LineIndex<'a>,
    doc: Option<RawDocument>,
    stack: Vec<Open>,
    done: bool,
}

impl Tree<'_> {
    /// The document element.
    fn root(&mut self, tag: Tag) -> Result<()> {
        if self.done || self.doc.is_some() {
            return Err(invalid(
                tag.here,
                Problem::WrongRoot(format!(
                    "a second document element <{}> after </machinemodel>",
                    tag.name
                )),
            ));
        }
        if tag.name != "machinemodel" {
            return Err(invalid(
                tag.here,
                Problem::WrongRoot(format!(
                    "the document element is <{}>, expected <machinemodel>",
                    tag.name
                )),
            ));
        }
        self.doc = Some(RawDocument {
            location: tag.here,
            attrs: tag.attrs,
            nodes: Vec::new(),
        });
        if tag.empty {
            self.done = true;
        } else {
            self.stack.push(Open::Model);
        }
        Ok(())
    }

    /// An element inside the innermost open one: a `<node>` in the document element or a node,
    /// or a node's one `<lbmethod>`.
    fn child(&mut self, tag: Tag) -> Result<()> {
        let d = self.doc.as_mut().expect("document element seen");
        let open = self.stack.last().expect("inside an element");
        match (open, tag.name.as_str()) {
            (Open::Model, "node") | (Open::Node(_), "node") => {
                let enclosing = match open {
                    Open::Node(i) => Some(*i),
                    _ => None,
                };
                d.nodes.push(RawNode {
                    location: tag.here,
                    attrs: tag.attrs,
                    enclosing,
                    lbmethod: None,
                });
                if !tag.empty {
                    self.stack.push(Open::Node(d.nodes.len() - 1));
                }
            }
            (Open::Node(i), "lbmethod") => {
                let node = &mut d.nodes[*i];
                if node.lbmethod.is_some() {
                    return Err(invalid(tag.here, Problem::DuplicateLbMethod));
                }
                node.lbmethod = Some(RawLbMethod {
                    location: tag.here,
                    attrs: tag.attrs,
                });
                if !tag.empty {
                    self.stack.push(Open::LbMethod);
                }
            }
            (open, _) => {
                return Err(invalid(
                    tag.here,
                    Problem::UnknownElement {
                        element: tag.name,
                        inside: open.name().to_string(),
                    },
                ));
            }
        }
        Ok(())
    }

    /// At the end of the file (`len` bytes): the document, if every element was closed and
    /// there was one.
    fn finish(self, file: &str, len: usize) -> Result<RawDocument> {
        if let Some(open) = self.stack.last() {
            let what = match open {
                Open::Node(i) => {
                    let d = self.doc.as_ref().expect("document element seen");
                    format!("<node> opened at {} is not closed", d.nodes[*i].location)
                }
                other => format!("<{}> is not closed", other.name()),
            };
            return Err(invalid(
                self.index.location(len),
                Problem::NotWellFormed(format!("unexpected end of file: {what}")),
            ));
        }
        self.doc
            .ok_or_else(|| invalid(file_start(file), Problem::Empty))
    }
}

/// Text `raw` read from byte `start` on: an error unless it is only whitespace.
fn no_text(index: &LineIndex<'_>, raw: &[u8], start: usize) -> Result<()> {
    let raw = String::from_utf8_lossy(raw);
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(());
    }
    let lead = raw.len() - raw.trim_start().len();
    let mut shown: String = trimmed.chars().take(40).collect();
    if trimmed.chars().count() > 40 {
        shown.push('…');
    }
    Err(invalid(
        index.location(start + lead),
        Problem::TextContent(shown),
    ))
}

/// The attributes of a tag, each located at its name.
fn attributes(
    index: &LineIndex<'_>,
    reader: &Reader<&[u8]>,
    e: &BytesStart<'_>,
    tag_at: usize,
) -> Result<Vec<Attribute>> {
    let raw: &[u8] = e.as_ref();
    let content_at = tag_at + 1; // after '<'
    let mut cursor = e.name().as_ref().len();
    let mut out = Vec::new();
    for attr in e.attributes().with_checks(true) {
        let attr = match attr {
            Ok(a) => a,
            Err(err) => {
                use quick_xml::events::attributes::AttrError as A;
                let pos = match err {
                    A::ExpectedEq(p)
                    | A::ExpectedValue(p)
                    | A::UnquotedValue(p)
                    | A::ExpectedQuote(p, _)
                    | A::Duplicated(p, _) => p,
                };
                return Err(invalid(
                    index.location(content_at + pos),
                    Problem::NotWellFormed(err.to_string()),
                ));
            }
        };
        let key = attr.key.as_ref();
        // Attributes come in order: skip whitespace, the key is here.
        while cursor < raw.len() && raw[cursor].is_ascii_whitespace() {
            cursor += 1;
        }
        let key_at = cursor;
        cursor = skip_attribute(raw, cursor, key.len());
        let location = index.location(content_at + key_at);
        let name = String::from_utf8_lossy(key).into_owned();
        let value = match attr.decode_and_unescape_value(reader.decoder()) {
            Ok(v) => v.into_owned(),
            Err(err) => {
                return Err(invalid(
                    location,
                    Problem::NotWellFormed(format!("in the value of `{name}`: {err}")),
                ));
            }
        };
        out.push(Attribute {
            name,
            value,
            location,
        });
    }
    Ok(out)
}

/// From the start of an attribute `key="value"` (key `key_len` bytes long), the index after it.
fn skip_attribute(raw: &[u8], at: usize, key_len: usize) -> usize {
    let mut i = (at + key_len).min(raw.len());
    while i < raw.len() && raw[i] != b'=' {
        i += 1;
    }
    i += 1;
    while i < raw.len() && raw[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < raw.len() {
        let quote = raw[i];
        i += 1;
        while i < raw.len() && raw[i] != quote {
            i += 1;
        }
        i += 1;
    }
    i.min(raw.len())
}

/// Escapes text for a double-quoted XML attribute value.
pub(crate) fn escape_attr(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

/// Appends ` name="value"` to `out`.
pub(crate) fn push_attr(out: &mut String, name: &str, value: &str) {
    out.push(' ');
    out.push_str(name);
    out.push_str("=\"");
    out.push_str(&escape_attr(value));
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_counts_characters() {
        let text = "ab\nçd<x";
        let ix = LineIndex::new("f", text);
        assert_eq!(ix.location(0).to_string(), "f:1:1");
        assert_eq!(ix.location(3).to_string(), "f:2:1");
        // 'ç' is two bytes; '<' is the third character of line 2.
        assert_eq!(ix.location(text.find('<').unwrap()).to_string(), "f:2:3");
    }

    #[test]
    fn attributes_are_located_at_their_names() {
        let text = "<machinemodel>\n  <node a=\"x y\" \n     bb='2'/>\n</machinemodel>";
        let doc = parse("m.xml", text).unwrap();
        let n = &doc.nodes[0];
        assert_eq!(n.location.to_string(), "m.xml:2:3");
        assert_eq!(n.attrs[0].location.to_string(), "m.xml:2:9");
        assert_eq!(n.attrs[1].location.to_string(), "m.xml:3:6");
        assert_eq!(n.attrs[1].value, "2");
    }

    #[test]
    fn escapes_round_trip_through_the_parser() {
        let v = "a&b<c>\"d'\te\nf";
        let mut s = String::from("<machinemodel><node");
        push_attr(&mut s, "k", v);
        s.push_str("/></machinemodel>");
        let doc = parse("m", &s).unwrap();
        assert_eq!(doc.nodes[0].attrs[0].value, v);
    }
}
