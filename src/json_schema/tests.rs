use super::*;
use crate::codec::decode;

fn compiled(schema: &str) -> Validator {
    Validator::new(&decode(schema.as_bytes()).unwrap()).unwrap()
}

/// The first failure of `instance`, as "message at path".
fn failure(schema: &str, instance: &str) -> Option<String> {
    let failure = compiled(schema).first_error(&decode(instance.as_bytes()).unwrap())?;
    Some(if failure.at.is_empty() { failure.message } else { format!("{} at {}", failure.message, failure.at) })
}

fn refused(schema: &str) -> String {
    Validator::new(&decode(schema.as_bytes()).unwrap()).unwrap_err()
}

#[test]
fn messages_keep_the_wording_agents_already_saw() {
    let object = r#"{"type":"object","properties":{"t":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}}},"required":["t"],"additionalProperties":false}"#;
    assert_eq!(failure(object, r#"{"t":"warm"}"#).unwrap(), r#""warm" is not of type "number" at /t"#);
    assert_eq!(failure(object, r#"{}"#).unwrap(), r#""t" is a required property"#);
    assert_eq!(
        failure(object, r#"{"t":1,"x":1,"y":2}"#).unwrap(),
        "Additional properties are not allowed ('x', 'y' were unexpected)"
    );
    assert_eq!(failure(object, r#"{"t":1,"tags":["a",2]}"#).unwrap(), r#"2 is not of type "string" at /tags/1"#);
    assert_eq!(failure(object, "[1]").unwrap(), r#"[1] is not of type "object""#);
    assert_eq!(failure(r#"{"type":["string","null"]}"#, "1").unwrap(), r#"1 is not of types "string", "null""#);
    assert_eq!(failure(r#"{"enum":["a","b","c"]}"#, r#""d""#).unwrap(), r#""d" is not one of "a", "b" or "c""#);
    assert_eq!(failure(r#"{"enum":[1,2,3,4,5]}"#, "6").unwrap(), "6 is not one of 1, 2 or 3 other candidates");
    assert_eq!(failure(r#"{"const":"on"}"#, r#""off""#).unwrap(), r#""on" was expected"#);
    assert_eq!(failure(r#"{"minimum":3}"#, "2").unwrap(), "2 is less than the minimum of 3");
    assert_eq!(failure(r#"{"exclusiveMaximum":3}"#, "3").unwrap(), "3 is greater than or equal to the maximum of 3");
    assert_eq!(failure(r#"{"minLength":2}"#, r#""é""#).unwrap(), r#""é" is shorter than 2 characters"#);
    assert_eq!(failure(r#"{"maxItems":1}"#, "[1,2]").unwrap(), "[1,2] has more than 1 item");
    assert_eq!(failure(r#"{"minProperties":2}"#, r#"{"a":1}"#).unwrap(), r#"{"a":1} has less than 2 properties"#);
    assert_eq!(failure(r#"{"pattern":"^[a-z]+$"}"#, r#""A1""#).unwrap(), r#""A1" does not match "^[a-z]+$""#);
    assert_eq!(failure(r#"{"multipleOf":0.01}"#, "0.075").unwrap(), "0.075 is not a multiple of 0.01");
    assert_eq!(failure(r#"{"uniqueItems":true}"#, "[1,1.0]").unwrap(), "[1,1] has non-unique elements");
    assert_eq!(
        failure(r#"{"not":{"type":"string"}}"#, r#""x""#).unwrap(),
        r#"{"type":"string"} is not allowed for "x""#
    );
    assert_eq!(failure("false", "1").unwrap(), "False schema does not allow 1");
    let any_of = r#"{"anyOf":[{"type":"string"},{"type":"integer"}]}"#;
    assert_eq!(
        failure(any_of, "1.5").unwrap(),
        "1.5 is not valid under any of the schemas listed in the 'anyOf' keyword"
    );
    let one_of = r#"{"oneOf":[{"type":"number"},{"type":"integer"}]}"#;
    assert_eq!(
        failure(one_of, "1").unwrap(),
        "1 is valid under more than one of the schemas listed in the 'oneOf' keyword"
    );
    assert_eq!(failure(r#"{"contains":{"const":1}}"#, "[2]").unwrap(), "None of [2] are valid under the given schema");
}

#[test]
fn valid_values_pass_and_null_is_a_present_value() {
    let schema = r#"{"type":"object","required":["a"],"properties":{"a":{"type":"null"}}}"#;
    assert_eq!(failure(schema, r#"{"a":null}"#), None);
    assert_eq!(failure(r#"{"type":"integer"}"#, "2.0"), None);
    assert_eq!(failure(r#"{"multipleOf":0.1}"#, "0.3"), None);
    assert_eq!(failure(r#"{"multipleOf":0.123456789}"#, "1e308").unwrap(), "1e+308 is not a multiple of 0.123456789");
}

#[test]
fn of_several_failures_the_alphabetically_first_keyword_is_told() {
    let schema = r#"{"type":"string","minLength":5,"pattern":"^x"}"#;
    assert_eq!(failure(schema, r#""ab""#).unwrap(), r#""ab" is shorter than 5 characters"#);
}

#[test]
fn references_follow_pointers_anchors_and_ids() {
    let defs = r##"{"$defs":{"pos":{"type":"integer","minimum":1}},"properties":{"n":{"$ref":"#/$defs/pos"}}}"##;
    assert_eq!(failure(defs, r#"{"n":0}"#).unwrap(), "0 is less than the minimum of 1 at /n");
    let anchor = r##"{"$defs":{"x":{"$anchor":"word","type":"string"}},"items":{"$ref":"#word"}}"##;
    assert_eq!(failure(anchor, r#"["a",1]"#).unwrap(), r#"1 is not of type "string" at /1"#);
    let ids = r#"{"$id":"https://example.com/root.json","$defs":{"a":{"$id":"item.json","type":"boolean"}},"items":{"$ref":"item.json"}}"#;
    assert_eq!(failure(ids, "[true,3]").unwrap(), r#"3 is not of type "boolean" at /1"#);
    let escaped = r##"{"$defs":{"a/b":{"type":"string"}},"$ref":"#/$defs/a~1b"}"##;
    assert_eq!(failure(escaped, "1").unwrap(), r#"1 is not of type "string""#);
    let tree = r##"{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false}"##;
    assert_eq!(
        failure(tree, r#"{"kids":[{"kids":[]},{"bad":1}]}"#).unwrap(),
        "Additional properties are not allowed ('bad' was unexpected) at /kids/1"
    );
}

#[test]
fn a_schema_that_refers_to_itself_forever_fails_the_value_not_the_stack() {
    let endless = r##"{"$ref":"#"}"##;
    let why = failure(endless, "1").unwrap();
    assert!(why.ends_with("its schema's references nest deeper than 256"), "{why}");
}

#[test]
fn drafts_before_2019_ignore_siblings_of_ref_and_use_their_own_keywords() {
    let draft7 = r##"{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s","minLength":9}"##;
    assert_eq!(failure(draft7, r#""abc""#), None);
    let draft2020 = r##"{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","minLength":9}"##;
    assert_eq!(failure(draft2020, r#""abc""#).unwrap(), r#""abc" is shorter than 9 characters"#);
    let draft4 = r#"{"$schema":"http://json-schema.org/draft-04/schema#","maximum":3,"exclusiveMaximum":true}"#;
    assert_eq!(failure(draft4, "3").unwrap(), "3 is greater than or equal to the maximum of 3");
    let tuple7 =
        r#"{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}"#;
    assert_eq!(failure(tuple7, r#"["a",1,2]"#).unwrap(), "Additional items are not allowed (1, 2 were unexpected)");
    let tuple2020 = r#"{"prefixItems":[{"type":"string"}],"items":false}"#;
    assert_eq!(failure(tuple2020, r#"["a",1]"#).unwrap(), "Additional items are not allowed (1 was unexpected)");
    let dependencies = r#"{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"card":["billing"]}}"#;
    assert_eq!(failure(dependencies, r#"{"card":1}"#).unwrap(), r#""billing" is a required property"#);
}

#[test]
fn formats_are_asserted_up_to_draft_7_and_annotations_after() {
    let draft7 =
        |format: &str| format!(r#"{{"$schema":"http://json-schema.org/draft-07/schema#","format":"{format}"}}"#);
    assert_eq!(failure(&draft7("email"), r#""nobody""#).unwrap(), r#""nobody" is not a "email""#);
    assert_eq!(failure(&draft7("email"), r#""a.b@example.com""#), None);
    assert_eq!(
        failure(&draft7("date-time"), r#""2026-02-30T10:00:00Z""#).unwrap(),
        r#""2026-02-30T10:00:00Z" is not a "date-time""#
    );
    assert_eq!(failure(&draft7("date-time"), r#""2026-12-06T20:08:51.5+01:00""#), None);
    assert_eq!(failure(&draft7("uri"), r#""not a uri""#).unwrap(), r#""not a uri" is not a "uri""#);
    assert_eq!(failure(&draft7("uri"), r#""https://example.com/a?b#c""#), None);
    assert_eq!(failure(&draft7("uuid"), r#""0f8e1c2a-3b4d-4e5f-8a9b-0c1d2e3f4a5b""#), None);
    assert_eq!(failure(&draft7("ipv4"), r#""256.1.1.1""#).unwrap(), r#""256.1.1.1" is not a "ipv4""#);
    assert_eq!(failure(&draft7("made-up"), r#""anything""#), None);
    assert_eq!(failure(r#"{"format":"email"}"#, r#""nobody""#), None);
}

#[test]
fn unevaluated_properties_see_what_every_passing_applicator_evaluated() {
    let schema = r#"{"properties":{"a":true},"anyOf":[{"properties":{"b":true}},{"properties":{"c":true}}],"unevaluatedProperties":false}"#;
    assert_eq!(failure(schema, r#"{"a":1,"b":2,"c":3}"#), None);
    assert_eq!(
        failure(schema, r#"{"a":1,"d":4}"#).unwrap(),
        "Unevaluated properties are not allowed ('d' was unexpected)"
    );
    let items = r#"{"prefixItems":[true],"contains":{"type":"string"},"unevaluatedItems":false}"#;
    assert_eq!(failure(items, r#"[1,"x"]"#), None);
    assert_eq!(failure(items, r#"[1,"x",2]"#).unwrap(), "Unevaluated items are not allowed (2 was unexpected)");
}

#[test]
fn schemas_that_are_not_schemas_are_refused_with_where_and_why() {
    assert_eq!(refused(r#"{"type":12}"#), r#""type" must be a type name or an array of them, not 12"#);
    assert_eq!(
        refused(r#"{"properties":{"a":{"minimum":"3"}}}"#),
        r#"at /properties/a: "minimum" must be a number, not "3""#
    );
    assert_eq!(refused(r#"{"properties":{"a":3}}"#), "at /properties/a: a schema is an object or a boolean, not 3");
    assert_eq!(
        refused(r##"{"$ref":"#/$defs/missing"}"##),
        r##"its $ref "#/$defs/missing" does not resolve (only references within the schema are followed)"##
    );
    assert_eq!(
        refused(r#"{"$ref":"https://example.com/other.json"}"#),
        r#"its $ref "https://example.com/other.json" does not resolve (only references within the schema are followed)"#
    );
    assert!(
        refused(r#"{"pattern":"(?<=a)b"}"#).starts_with(r#"the pattern "(?<=a)b" is not one this validator can run"#)
    );
    let tuple = refused(r#"{"items":[{"type":"string"}]}"#);
    assert_eq!(tuple, r#"at /items: a schema is an object or a boolean, not [{"type":"string"}]"#);
    let deep = format!("{}{}", r#"{"not":"#.repeat(200), "true".to_string() + &"}".repeat(200));
    assert_eq!(refused(&deep), "it nests deeper than 128 levels");
}

#[test]
fn unknown_keywords_are_annotations_whatever_they_hold() {
    assert_eq!(failure(r#"{"description":3,"examples":[{"type":12}],"x-anything":{"minimum":"no"}}"#, "1"), None);
}

#[test]
fn kept_texts_and_byte_strings_are_checked_as_their_values() {
    let validator = compiled(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#);
    let kept = crate::codec::RawJson::encoded(br#"{"n":"x"}"#.to_vec());
    let failure = validator.first_error(&kept).unwrap();
    assert_eq!((failure.message.as_str(), failure.at.as_str()), (r#""x" is not of type "integer""#, "/n"));
    let bytes = Json::Str(vec![0xff, b'a']);
    assert!(compiled(r#"{"maxLength":2}"#).first_error(&bytes).is_none());
}

#[test]
fn messages_quote_a_server_s_values_and_names_within_bounds() {
    let big = format!(r#"["{}"]"#, "x".repeat(10_000));
    let why = failure(r#"{"type":"object"}"#, &big).unwrap();
    assert!(why.ends_with(r#"... (9004 more characters) is not of type "object""#), "{why}");
    let many: Vec<String> = (0..40).map(|i| format!(r#""k{i}":1"#)).collect();
    let why = failure(r#"{"additionalProperties":false}"#, &format!("{{{}}}", many.join(","))).unwrap();
    let shown: Vec<String> = (0..16).map(|i| format!("'k{i}'")).collect();
    assert_eq!(
        why,
        format!("Additional properties are not allowed ({} and 24 more were unexpected)", shown.join(", "))
    );
    let long_ref = format!(r##"{{"$ref":"#/{}"}}"##, "a".repeat(200));
    assert!(refused(&long_ref).starts_with(&format!(r##"its $ref "#/{}... (138 more characters)""##, "a".repeat(62))));
}
