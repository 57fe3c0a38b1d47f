//! The shared credentials and config files of AWS tools (`~/.aws/credentials`,
//! `~/.aws/config`), read for an `s3://` replica when the environment does not name the
//! credentials itself: the profile `AWS_PROFILE` (default `default`), from the files
//! `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` when set. Only static keys and the
//! region are read; other ways of getting credentials (SSO, processes, roles) are those the
//! `object_store` crate itself supports from the environment.

use std::path::{Path, PathBuf};

/// The settings (`object_store`'s configuration keys) the profile gives, for the keys the
/// environment leaves unset; empty when there is nothing to add.
#[must_use]
pub fn settings_from_files() -> Vec<(&'static str, String)> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let home = env("HOME").map(PathBuf::from);
    let credentials = env("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".aws/credentials")));
    let config =
        env("AWS_CONFIG_FILE").map(PathBuf::from).or_else(|| home.map(|h| h.join(".aws/config")));
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
    let keys_set = env("AWS_ACCESS_KEY_ID").is_some();
    let region_set = env("AWS_REGION").is_some() || env("AWS_DEFAULT_REGION").is_some();
    settings_for(credentials.as_deref(), config.as_deref(), &profile, keys_set, region_set)
}

/// [`settings_from_files`] with its inputs given: the files, the profile, and whether the
/// environment already sets the keys and the region.
#[must_use]
pub fn settings_for(
    credentials: Option<&Path>,
    config: Option<&Path>,
    profile: &str,
    keys_set: bool,
    region_set: bool,
) -> Vec<(&'static str, String)> {
    let mut settings = Vec::new();
    let read = |path: Option<&Path>, section: &str| {
        path.and_then(|p| std::fs::read_to_string(p).ok())
            .map(|text| section_of(&text, section))
            .unwrap_or_default()
    };
    if !keys_set {
        let found = read(credentials, profile);
        let key = |name: &str| found.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        if let (Some(id), Some(secret)) = (key("aws_access_key_id"), key("aws_secret_access_key")) {
            settings.push(("aws_access_key_id", id));
            settings.push(("aws_secret_access_key", secret));
            if let Some(token) = key("aws_session_token") {
                settings.push(("aws_session_token", token));
            }
        }
    }
    if !region_set {
        // In the config file a profile's section is `[profile NAME]`, except `[default]`.
        let section =
            if profile == "default" { "default".to_owned() } else { format!("profile {profile}") };
        let found = read(config, &section);
        if let Some((_, region)) = found.iter().find(|(k, _)| k == "region") {
            settings.push(("aws_region", region.clone()));
        }
    }
    settings
}

/// The `key = value` lines of the INI section `[name]` of `text`.
fn section_of(text: &str, name: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut pairs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = header.trim() == name;
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            pairs.push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_gives_its_keys_and_region_unless_the_environment_sets_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let credentials = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n\
             # another\n[work]\naws_access_key_id=AKIDWORK\naws_secret_access_key=s2\n\
             aws_session_token = t2\n",
        )
        .expect("write");
        std::fs::write(
            &config,
            "[default]\nregion = eu-west-1\n[profile work]\nregion=us-east-2\n",
        )
        .expect("write");
        let got = |profile: &str, keys_set: bool, region_set: bool| {
            settings_for(Some(&credentials), Some(&config), profile, keys_set, region_set)
        };
        let pairs = |list: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
            list.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
        };
        assert_eq!(
            got("default", false, false),
            pairs(&[
                ("aws_access_key_id", "AKIDDEFAULT"),
                ("aws_secret_access_key", "s1"),
                ("aws_region", "eu-west-1")
            ])
        );
        assert_eq!(
            got("work", false, false),
            pairs(&[
                ("aws_access_key_id", "AKIDWORK"),
                ("aws_secret_access_key", "s2"),
                ("aws_session_token", "t2"),
                ("aws_region", "us-east-2")
            ])
        );
        assert_eq!(got("work", true, true), pairs(&[]));
        assert_eq!(got("missing", false, false), pairs(&[]));
        assert_eq!(settings_for(None, None, "default", false, false), pairs(&[]));
    }
}
