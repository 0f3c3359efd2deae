//! How each type of a request's field reads a parsed command line ([`FromMatches`]) and
//! which JSON kind it is ([`KindOf`]): what `request_fields!` builds each field from.

use super::*;

/// How a type is read from the parsed command line.
pub(super) trait FromMatches: Sized {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid>;
}

impl FromMatches for Option<String> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Ok(m.try_get_one::<String>(f.name).ok().flatten().cloned())
    }
}
impl FromMatches for Option<PathBuf> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Ok(m.try_get_one::<PathBuf>(f.name).ok().flatten().cloned())
    }
}
impl FromMatches for Option<u32> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Ok(m.try_get_one::<u32>(f.name).ok().flatten().copied())
    }
}
impl FromMatches for Option<Usd> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Ok(m.try_get_one::<Usd>(f.name).ok().flatten().copied())
    }
}
impl FromMatches for bool {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Ok(m.try_get_one::<bool>(f.name).ok().flatten() == Some(&true))
    }
}
impl FromMatches for Vec<PathBuf> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Ok(m.try_get_many::<PathBuf>(f.name)
            .ok()
            .flatten()
            .map(|v| v.cloned().collect())
            .unwrap_or_default())
    }
}
impl FromMatches for Vec<String> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        if f.flag == Flag::Trailing {
            let raw: Vec<OsString> = m
                .try_get_many::<OsString>(f.name)
                .ok()
                .flatten()
                .map(|v| v.cloned().collect())
                .unwrap_or_default();
            return raw
                .into_iter()
                .map(|a| {
                    a.into_string().map_err(|a| {
                        Invalid::whole(format!("argument {a:?} of the program is not valid UTF-8"))
                    })
                })
                .collect();
        }
        Ok(m.try_get_many::<String>(f.name)
            .ok()
            .flatten()
            .map(|v| v.cloned().collect())
            .unwrap_or_default())
    }
}
impl FromMatches for BTreeMap<String, String> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        let mut out = BTreeMap::new();
        for raw in Vec::<String>::from_matches(m, f)? {
            let (k, v) = crate::app::request::parse_kv(f.name, &raw)?;
            out.insert(k, v);
        }
        Ok(out)
    }
}
impl FromMatches for Option<AgentKind> {
    fn from_matches(m: &ArgMatches, f: &Field) -> Result<Self, Invalid> {
        Option::<String>::from_matches(m, f)?
            .map(|s| {
                serde_json::from_value(json!(s))
                    .map_err(|_| Invalid::new(f.name, format!("`{s}` is not an agent")))
            })
            .transpose()
    }
}

/// The [`Kind`] of a field's Rust type.
pub(super) trait KindOf {
    const KIND: Kind;
}
impl KindOf for Option<String> {
    const KIND: Kind = Kind::Text;
}
impl KindOf for Option<PathBuf> {
    const KIND: Kind = Kind::Path;
}
impl KindOf for Option<u32> {
    const KIND: Kind = Kind::Count;
}
impl KindOf for Option<Usd> {
    const KIND: Kind = Kind::Money;
}
impl KindOf for bool {
    const KIND: Kind = Kind::Switch;
}
impl KindOf for Vec<String> {
    const KIND: Kind = Kind::Texts;
}
impl KindOf for Vec<PathBuf> {
    const KIND: Kind = Kind::Paths;
}
impl KindOf for BTreeMap<String, String> {
    const KIND: Kind = Kind::Map;
}
impl KindOf for Option<AgentKind> {
    const KIND: Kind = Kind::Agent;
}
