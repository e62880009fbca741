//! Validation: an instance walked beside its schema, keyword by keyword.
//!
//! The messages are worded as the validator before this one worded them
//! (`"warm" is not of type "number"`), since agents and users read them.
//! Within one schema every keyword is tried, and the failure of the
//! alphabetically first failing keyword is the one told, so that the same
//! value against the same schema always hears the same complaint.

use std::borrow::Cow;

use super::formats::asserts_format;
use super::values::{characters, field, is_integer, number, pointer_step, said, same, shown, tree};
use super::wellformed::join;
use super::{Draft, Failure, Validator, DEFAULT_BASE};
use crate::codec::Json;
use crate::server_text::{listed, quoted_str, TEXT_CHARS};

/// References followed within references deeper than this fail the
/// value rather than the stack: a schema may refer to itself forever.
const MAX_DEPTH: usize = 256;

/// A failure on its way up: the path is gathered in reverse, one step
/// per level it passes, so that a passing value costs no path at all.
struct Failing {
    message: String,
    steps: Vec<String>,
}

impl Failing {
    fn new(message: String) -> Failing {
        Failing { message, steps: Vec::new() }
    }

    fn below(mut self, step: String) -> Failing {
        self.steps.push(step);
        self
    }
}

/// What the keywords that passed evaluated of an object or array, for
/// `unevaluatedProperties` and `unevaluatedItems` (noted only for
/// schemas that have them).
#[derive(Default)]
struct Seen {
    /// Indices of the object's pairs.
    properties: Vec<usize>,
    /// Leading items evaluated, and other items by index.
    leading_items: usize,
    items: Vec<usize>,
}

impl Seen {
    fn add(&mut self, other: Seen) {
        self.properties.extend(other.properties);
        self.leading_items = self.leading_items.max(other.leading_items);
        self.items.extend(other.items);
    }

    fn all_items(count: usize) -> Seen {
        Seen { leading_items: count, ..Seen::default() }
    }
}

type Outcome = Result<Seen, Failing>;

pub fn first_error(validator: &Validator, instance: &Json) -> Option<Failure> {
    let mut walk = Walk { v: validator, depth: 0 };
    let failing = walk.schema(&validator.root, DEFAULT_BASE, &tree(instance)).err()?;
    let at: String = failing.steps.iter().rev().map(|s| format!("/{s}")).collect();
    Some(Failure { message: failing.message, at: quoted_str(&at, TEXT_CHARS) })
}

struct Walk<'v> {
    v: &'v Validator,
    depth: usize,
}

impl Walk<'_> {
    fn schema(&mut self, schema: &Json, base: &str, instance: &Json) -> Outcome {
        let instance = tree(instance);
        let pairs = match schema {
            Json::Object(pairs) => pairs,
            Json::Bool(false) => return Err(Failing::new(format!("False schema does not allow {}", shown(&instance)))),
            _ => return Ok(Seen::default()),
        };
        if self.depth >= MAX_DEPTH {
            let why = format!(
                "{} could not be checked: its schema's references nest deeper than {MAX_DEPTH}",
                shown(&instance)
            );
            return Err(Failing::new(why));
        }
        self.depth += 1;
        let base = self.base_inside(pairs, base);
        let outcome = self.keywords(pairs, &base, &instance);
        self.depth -= 1;
        outcome
    }

    fn base_inside<'b>(&self, pairs: &[(Vec<u8>, Json)], base: &'b str) -> Cow<'b, str> {
        let id_keyword: &[u8] = if self.v.draft == Draft::Four { b"id" } else { b"$id" };
        let hidden = self.v.draft <= Draft::Seven && field(pairs, b"$ref").is_some();
        match field(pairs, id_keyword) {
            Some(Json::Str(id)) if !id.starts_with(b"#") && !hidden => {
                join(base, &String::from_utf8_lossy(id)).map_or(Cow::Borrowed(base), Cow::Owned)
            }
            _ => Cow::Borrowed(base),
        }
    }

    fn keywords(&mut self, pairs: &[(Vec<u8>, Json)], base: &str, instance: &Json) -> Outcome {
        // Before 2019-09, a `$ref` stands for the whole schema it is in.
        if self.v.draft <= Draft::Seven {
            if let Some(Json::Str(reference)) = field(pairs, b"$ref") {
                return self.reference(base, reference, instance);
            }
        }
        let mut seen = Seen::default();
        let mut first: Option<(&[u8], Failing)> = None;
        let mut unevaluated = Vec::new();
        for (keyword, value) in pairs {
            if keyword.starts_with(b"unevaluated") {
                unevaluated.push((keyword.as_slice(), value));
                continue;
            }
            match self.keyword(keyword, value, pairs, base, instance) {
                Ok(more) => seen.add(more),
                Err(failing) if first.as_ref().is_none_or(|(k, _)| keyword.as_slice() < *k) => {
                    first = Some((keyword, failing))
                }
                Err(_) => {}
            }
        }
        for (keyword, value) in unevaluated {
            let outcome = self.unevaluated(keyword, value, base, instance, &seen);
            match outcome {
                Ok(more) => seen.add(more),
                Err(failing) if first.as_ref().is_none_or(|(k, _)| keyword < *k) => first = Some((keyword, failing)),
                Err(_) => {}
            }
        }
        match first {
            Some((_, failing)) => Err(failing),
            None => Ok(seen),
        }
    }

    fn keyword(
        &mut self,
        keyword: &[u8],
        value: &Json,
        siblings: &[(Vec<u8>, Json)],
        base: &str,
        instance: &Json,
    ) -> Outcome {
        let draft = self.v.draft;
        let fail = |message: String| Err(Failing::new(message));
        let passed = Ok(Seen::default());
        match (keyword, instance) {
            (b"type", _) => check_type(value, instance),
            (b"enum", _) => match value {
                Json::Array(options) if !options.iter().any(|o| same(o, instance)) => {
                    fail(enum_message(instance, options))
                }
                _ => passed,
            },
            (b"const", _) if draft >= Draft::Six && !same(value, instance) => {
                fail(format!("{} was expected", shown(value)))
            }
            (b"$ref", _) | (b"$dynamicRef", _) | (b"$recursiveRef", _) => match value {
                Json::Str(reference) => self.reference(base, reference, instance),
                _ => passed,
            },
            (b"allOf", _) => self.all_of(value, base, instance),
            (b"anyOf", _) => self.any_of(value, base, instance),
            (b"oneOf", _) => self.one_of(value, base, instance),
            (b"not", _) => match self.schema(value, base, instance) {
                Ok(_) => fail(format!("{} is not allowed for {}", shown(value), shown(instance))),
                Err(_) => passed,
            },
            (b"if", _) if draft >= Draft::Seven => self.if_then_else(value, siblings, base, instance),
            (b"minimum" | b"maximum" | b"exclusiveMinimum" | b"exclusiveMaximum", _) => {
                bound(keyword, value, siblings, draft, instance)
            }
            (b"multipleOf", _) => multiple_of(value, instance),
            (b"minLength" | b"maxLength", Json::Str(s)) => length(keyword, value, characters(s), instance),
            (b"pattern", Json::Str(s)) => self.pattern(value, s, instance),
            (b"format", Json::Str(s)) if draft <= Draft::Seven => match value {
                Json::Str(format) if !asserts_format(format, s) => {
                    fail(format!("{} is not a \"{}\"", shown(instance), said(format)))
                }
                _ => passed,
            },
            (_, Json::Object(pairs)) => self.object_keyword(keyword, value, siblings, base, pairs, instance),
            (_, Json::Array(items)) => self.array_keyword(keyword, value, siblings, base, items, instance),
            _ => passed,
        }
    }

    fn reference(&mut self, base: &str, reference: &[u8], instance: &Json) -> Outcome {
        let target = self.v.refs.get(base).and_then(|refs| refs.get(reference));
        // Every reference was resolved when the schema was compiled, under
        // the base the walk computes the same way.
        let Some(target) = target else { return Ok(Seen::default()) };
        let node = super::values::at(&self.v.root, &target.steps).unwrap_or(&Json::Bool(true));
        self.schema(node, &target.base, instance)
    }

    fn all_of(&mut self, schemas: &Json, base: &str, instance: &Json) -> Outcome {
        let mut seen = Seen::default();
        for schema in schemas.elements() {
            seen.add(self.schema(schema, base, instance)?);
        }
        Ok(seen)
    }

    fn any_of(&mut self, schemas: &Json, base: &str, instance: &Json) -> Outcome {
        let mut seen: Option<Seen> = None;
        for schema in schemas.elements() {
            if let Ok(more) = self.schema(schema, base, instance) {
                seen.get_or_insert_with(Seen::default).add(more);
                if !self.v.tracks_evaluation {
                    break;
                }
            }
        }
        let why = || format!("{} is not valid under any of the schemas listed in the 'anyOf' keyword", shown(instance));
        seen.ok_or_else(|| Failing::new(why()))
    }

    fn one_of(&mut self, schemas: &Json, base: &str, instance: &Json) -> Outcome {
        let mut passing: Option<Seen> = None;
        for schema in schemas.elements() {
            if let Ok(seen) = self.schema(schema, base, instance) {
                if passing.is_some() {
                    let why = "is valid under more than one of the schemas listed in the 'oneOf' keyword";
                    return Err(Failing::new(format!("{} {why}", shown(instance))));
                }
                passing = Some(seen);
            }
        }
        let why = || format!("{} is not valid under any of the schemas listed in the 'oneOf' keyword", shown(instance));
        passing.ok_or_else(|| Failing::new(why()))
    }

    fn if_then_else(&mut self, condition: &Json, siblings: &[(Vec<u8>, Json)], base: &str, instance: &Json) -> Outcome {
        let (mut seen, branch) = match self.schema(condition, base, instance) {
            Ok(seen) => (seen, field(siblings, b"then")),
            Err(_) => (Seen::default(), field(siblings, b"else")),
        };
        if let Some(branch) = branch {
            seen.add(self.schema(branch, base, instance)?);
        }
        Ok(seen)
    }

    fn pattern(&self, pattern: &Json, text: &[u8], instance: &Json) -> Outcome {
        let Json::Str(pattern) = pattern else { return Ok(Seen::default()) };
        match self.v.patterns.get(pattern) {
            Some(regex) if !regex.is_match(&String::from_utf8_lossy(text)) => {
                let why = format!("{} does not match \"{}\"", shown(instance), said(pattern));
                Err(Failing::new(why))
            }
            _ => Ok(Seen::default()),
        }
    }

    fn matches_pattern(&self, pattern: &[u8], text: &[u8]) -> bool {
        self.v.patterns.get(pattern).is_some_and(|regex| regex.is_match(&String::from_utf8_lossy(text)))
    }

    fn object_keyword(
        &mut self,
        keyword: &[u8],
        value: &Json,
        siblings: &[(Vec<u8>, Json)],
        base: &str,
        pairs: &[(Vec<u8>, Json)],
        instance: &Json,
    ) -> Outcome {
        let draft = self.v.draft;
        let count = |n: usize, what: &str| {
            format!("{} has {what} {n} propert{}", shown(instance), if n == 1 { "y" } else { "ies" })
        };
        match keyword {
            b"required" => required(value.elements(), pairs),
            b"minProperties" | b"maxProperties" => {
                let limit = number(value).unwrap_or(0.0) as usize;
                match keyword {
                    b"minProperties" if pairs.len() < limit => Err(Failing::new(count(limit, "less than"))),
                    b"maxProperties" if pairs.len() > limit => Err(Failing::new(count(limit, "more than"))),
                    _ => Ok(Seen::default()),
                }
            }
            b"properties" => {
                let mut seen = Seen::default();
                for (i, (name, item)) in pairs.iter().enumerate() {
                    let Some(schema) = field(value_pairs(value), name) else { continue };
                    self.schema(schema, base, item).map_err(|f| f.below(pointer_step(name)))?;
                    self.note(&mut seen.properties, i);
                }
                Ok(seen)
            }
            b"patternProperties" => {
                let mut seen = Seen::default();
                for (i, (name, item)) in pairs.iter().enumerate() {
                    for (pattern, schema) in value_pairs(value) {
                        if self.matches_pattern(pattern, name) {
                            self.schema(schema, base, item).map_err(|f| f.below(pointer_step(name)))?;
                            self.note(&mut seen.properties, i);
                        }
                    }
                }
                Ok(seen)
            }
            b"additionalProperties" => self.additional_properties(value, siblings, base, pairs),
            b"propertyNames" if draft >= Draft::Six => {
                for (name, _) in pairs {
                    self.schema(value, base, &Json::Str(name.clone()))?;
                }
                Ok(Seen::default())
            }
            b"dependencies" | b"dependentRequired" | b"dependentSchemas" => {
                let mut seen = Seen::default();
                for (name, dependency) in value_pairs(value) {
                    if field(pairs, name).is_none() {
                        continue;
                    }
                    match dependency {
                        Json::Array(names) => {
                            required(names.iter(), pairs)?;
                        }
                        schema => seen.add(self.schema(schema, base, instance)?),
                    }
                }
                Ok(seen)
            }
            _ => Ok(Seen::default()),
        }
    }

    fn additional_properties(
        &mut self,
        schema: &Json,
        siblings: &[(Vec<u8>, Json)],
        base: &str,
        pairs: &[(Vec<u8>, Json)],
    ) -> Outcome {
        let declared = field(siblings, b"properties").map(value_pairs).unwrap_or(&[]);
        let patterns = field(siblings, b"patternProperties").map(value_pairs).unwrap_or(&[]);
        let mut seen = Seen::default();
        let mut unexpected = Vec::new();
        for (i, (name, item)) in pairs.iter().enumerate() {
            if field(declared, name).is_some() || patterns.iter().any(|(p, _)| self.matches_pattern(p, name)) {
                continue;
            }
            if matches!(schema, Json::Bool(false)) {
                unexpected.push(name.as_slice());
                continue;
            }
            self.schema(schema, base, item).map_err(|f| f.below(pointer_step(name)))?;
            self.note(&mut seen.properties, i);
        }
        if unexpected.is_empty() {
            return Ok(seen);
        }
        Err(Failing::new(format!("Additional properties are not allowed ({})", were_unexpected(&unexpected))))
    }

    fn array_keyword(
        &mut self,
        keyword: &[u8],
        value: &Json,
        siblings: &[(Vec<u8>, Json)],
        base: &str,
        items: &[Json],
        instance: &Json,
    ) -> Outcome {
        let draft = self.v.draft;
        let limit = number(value).unwrap_or(0.0) as usize;
        let count =
            |n: usize, what: &str| format!("{} has {what} {n} item{}", shown(instance), if n == 1 { "" } else { "s" });
        match keyword {
            b"minItems" if items.len() < limit => Err(Failing::new(count(limit, "less than"))),
            b"maxItems" if items.len() > limit => Err(Failing::new(count(limit, "more than"))),
            b"uniqueItems" if matches!(value, Json::Bool(true)) => {
                let repeated = items.iter().enumerate().any(|(i, a)| items[..i].iter().any(|b| same(a, b)));
                match repeated {
                    true => Err(Failing::new(format!("{} has non-unique elements", shown(instance)))),
                    false => Ok(Seen::default()),
                }
            }
            b"prefixItems" if draft >= Draft::Y2020 => self.tuple(value, base, items),
            b"items" => match value {
                Json::Array(_) if draft <= Draft::Y2019 => self.tuple(value, base, items),
                _ => {
                    let after = match draft {
                        Draft::Y2020 => field(siblings, b"prefixItems").map_or(0, |p| p.elements().count()),
                        _ => 0,
                    };
                    self.rest(value, base, items, after)
                }
            },
            b"additionalItems" if draft <= Draft::Y2019 => match field(siblings, b"items") {
                Some(Json::Array(tuple)) => self.rest(value, base, items, tuple.len()),
                _ => Ok(Seen::default()),
            },
            b"contains" if draft >= Draft::Six => self.contains(value, siblings, base, items, instance),
            _ => Ok(Seen::default()),
        }
    }

    /// Notes an evaluated property or item, when something will ask.
    fn note(&self, evaluated: &mut Vec<usize>, index: usize) {
        if self.v.tracks_evaluation {
            evaluated.push(index);
        }
    }

    fn tuple(&mut self, schemas: &Json, base: &str, items: &[Json]) -> Outcome {
        let Json::Array(schemas) = schemas else { return Ok(Seen::default()) };
        for (i, (schema, item)) in schemas.iter().zip(items).enumerate() {
            self.schema(schema, base, item).map_err(|f| f.below(i.to_string()))?;
        }
        Ok(Seen::all_items(schemas.len().min(items.len())))
    }

    /// `schema` over the items from `after` on; `false` refuses them.
    fn rest(&mut self, schema: &Json, base: &str, items: &[Json], after: usize) -> Outcome {
        if items.len() <= after {
            return Ok(Seen::default());
        }
        if matches!(schema, Json::Bool(false)) {
            let verb = if items.len() - after == 1 { "was" } else { "were" };
            let extra = listed(items[after..].iter().map(shown));
            return Err(Failing::new(format!("Additional items are not allowed ({extra} {verb} unexpected)")));
        }
        for (i, item) in items.iter().enumerate().skip(after) {
            self.schema(schema, base, item).map_err(|f| f.below(i.to_string()))?;
        }
        Ok(Seen::all_items(items.len()))
    }

    fn contains(
        &mut self,
        schema: &Json,
        siblings: &[(Vec<u8>, Json)],
        base: &str,
        items: &[Json],
        instance: &Json,
    ) -> Outcome {
        let mut seen = Seen::default();
        let mut found = 0;
        for (i, item) in items.iter().enumerate() {
            if self.schema(schema, base, item).is_ok() {
                found += 1;
                self.note(&mut seen.items, i);
            }
        }
        let count = |keyword: &[u8]| match self.v.draft {
            Draft::Y2019 | Draft::Y2020 => field(siblings, keyword).and_then(number).map(|n| n as usize),
            _ => None,
        };
        let (least, most) = (count(b"minContains").unwrap_or(1), count(b"maxContains"));
        if found == 0 && least > 0 {
            return Err(Failing::new(format!("None of {} are valid under the given schema", shown(instance))));
        }
        if found < least {
            return Err(Failing::new(format!(
                "{} has less than {least} items valid under the given schema",
                shown(instance)
            )));
        }
        if let Some(most) = most.filter(|&most| found > most) {
            return Err(Failing::new(format!(
                "{} has more than {most} items valid under the given schema",
                shown(instance)
            )));
        }
        Ok(seen)
    }

    fn unevaluated(&mut self, keyword: &[u8], schema: &Json, base: &str, instance: &Json, seen: &Seen) -> Outcome {
        // Each left value with its step in the path, and its key for a
        // property (an item is named by its value, and only if refused).
        let (left, what, total): (Vec<Left>, _, _) = match (keyword, instance) {
            (b"unevaluatedProperties", Json::Object(pairs)) => {
                let left = pairs.iter().enumerate().filter(|(i, _)| !seen.properties.contains(i));
                let named = left.map(|(_, (name, item))| (pointer_step(name), Some(name.as_slice()), item));
                (named.collect(), "properties", pairs.len())
            }
            (b"unevaluatedItems", Json::Array(items)) => {
                let left = items.iter().enumerate().skip(seen.leading_items).filter(|(i, _)| !seen.items.contains(i));
                (left.map(|(i, item)| (i.to_string(), None, item)).collect(), "items", items.len())
            }
            _ => return Ok(Seen::default()),
        };
        if matches!(schema, Json::Bool(false)) && !left.is_empty() {
            let verb = if left.len() == 1 { "was" } else { "were" };
            let names = listed(left.iter().map(|(_, key, item)| match key {
                Some(key) => format!("'{}'", String::from_utf8_lossy(key)),
                None => shown(item),
            }));
            return Err(Failing::new(format!("Unevaluated {what} are not allowed ({names} {verb} unexpected)")));
        }
        for (step, _, item) in left {
            self.schema(schema, base, item).map_err(|f| f.below(step))?;
        }
        // Passing evaluates them all.
        Ok(Seen { properties: (0..total).collect(), ..Seen::all_items(total) })
    }
}

/// A value `unevaluated*` looks at: its step in the path, its key when it
/// is a property, and the value.
type Left<'a> = (String, Option<&'a [u8]>, &'a Json);

fn value_pairs(value: &Json) -> &[(Vec<u8>, Json)] {
    match value {
        Json::Object(pairs) => pairs,
        _ => &[],
    }
}

fn required<'a>(names: impl Iterator<Item = &'a Json>, pairs: &[(Vec<u8>, Json)]) -> Outcome {
    for name in names {
        if let Json::Str(key) = name {
            if field(pairs, key).is_none() {
                return Err(Failing::new(format!("{} is a required property", shown(name))));
            }
        }
    }
    Ok(Seen::default())
}

fn were_unexpected(names: &[&[u8]]) -> String {
    let verb = if names.len() == 1 { "was" } else { "were" };
    format!("{} {verb} unexpected", listed(names.iter().map(|n| format!("'{}'", String::from_utf8_lossy(n)))))
}

fn type_matches(name: &[u8], instance: &Json) -> bool {
    match name {
        b"null" => matches!(instance, Json::Null),
        b"boolean" => matches!(instance, Json::Bool(_)),
        b"object" => matches!(instance, Json::Object(_)),
        b"array" => matches!(instance, Json::Array(_)),
        b"number" => matches!(instance, Json::Int(_) | Json::Float(_)),
        b"string" => matches!(instance, Json::Str(_)),
        b"integer" => is_integer(instance),
        _ => false,
    }
}

fn check_type(types: &Json, instance: &Json) -> Outcome {
    match types {
        Json::Str(name) if !type_matches(name, instance) => {
            let why = format!("{} is not of type \"{}\"", shown(instance), said(name));
            Err(Failing::new(why))
        }
        Json::Array(names) if !names.iter().any(|n| matches!(n, Json::Str(n) if type_matches(n, instance))) => {
            Err(Failing::new(format!("{} is not of types {}", shown(instance), listed(names.iter().map(shown)))))
        }
        _ => Ok(Seen::default()),
    }
}

/// "`x` is not one of a, b or c", or the first two and how many more.
fn enum_message(instance: &Json, options: &[Json]) -> String {
    let shown_options: Vec<String> = options.iter().map(shown).collect();
    let listed = match shown_options.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        few @ [_, _] | few @ [_, _, _] => format!("{} or {}", few[..few.len() - 1].join(", "), few[few.len() - 1]),
        many => format!("{} or {} other candidates", many[..2].join(", "), many.len() - 2),
    };
    format!("{} is not one of {listed}", shown(instance))
}

fn bound(keyword: &[u8], limit: &Json, siblings: &[(Vec<u8>, Json)], draft: Draft, instance: &Json) -> Outcome {
    let (Some(x), Some(n)) = (number(instance), number(limit)) else { return Ok(Seen::default()) };
    // Draft 4's exclusive bounds are flags on `minimum` and `maximum`.
    let flagged = |flag: &[u8]| draft == Draft::Four && field(siblings, flag) == Some(&Json::Bool(true));
    let exact = match (instance, limit) {
        (Json::Int(a), Json::Int(b)) => Some(a.cmp(b)),
        _ => x.partial_cmp(&n),
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    let failed = match keyword {
        b"minimum" if flagged(b"exclusiveMinimum") => {
            matches!(exact, Some(Less | Equal)).then_some("is less than or equal to the minimum of")
        }
        b"maximum" if flagged(b"exclusiveMaximum") => {
            matches!(exact, Some(Greater | Equal)).then_some("is greater than or equal to the maximum of")
        }
        b"minimum" => matches!(exact, Some(Less)).then_some("is less than the minimum of"),
        b"maximum" => matches!(exact, Some(Greater)).then_some("is greater than the maximum of"),
        b"exclusiveMinimum" if draft > Draft::Four => {
            matches!(exact, Some(Less | Equal)).then_some("is less than or equal to the minimum of")
        }
        b"exclusiveMaximum" if draft > Draft::Four => {
            matches!(exact, Some(Greater | Equal)).then_some("is greater than or equal to the maximum of")
        }
        _ => None,
    };
    match failed {
        Some(why) => Err(Failing::new(format!("{} {why} {}", shown(instance), shown(limit)))),
        None => Ok(Seen::default()),
    }
}

fn multiple_of(divisor: &Json, instance: &Json) -> Outcome {
    let fits = match (instance, divisor) {
        (Json::Int(x), Json::Int(d)) if *d != 0 => x % d == 0,
        _ => match (number(instance), number(divisor)) {
            (Some(x), Some(d)) if d > 0.0 => {
                // Decimal divisors (0.01) are not exact in binary: a
                // quotient within rounding of an integer is one.
                let quotient = x / d;
                quotient.is_finite() && (quotient - quotient.round()).abs() <= 1e-9 * quotient.abs().max(1.0)
            }
            _ => true,
        },
    };
    match fits {
        true => Ok(Seen::default()),
        false => Err(Failing::new(format!("{} is not a multiple of {}", shown(instance), shown(divisor)))),
    }
}

fn length(keyword: &[u8], limit: &Json, count: usize, instance: &Json) -> Outcome {
    let limit = number(limit).unwrap_or(0.0) as usize;
    let plural = if limit == 1 { "" } else { "s" };
    match keyword {
        b"minLength" if count < limit => {
            Err(Failing::new(format!("{} is shorter than {limit} character{plural}", shown(instance))))
        }
        b"maxLength" if count > limit => {
            Err(Failing::new(format!("{} is longer than {limit} character{plural}", shown(instance))))
        }
        _ => Ok(Seen::default()),
    }
}
