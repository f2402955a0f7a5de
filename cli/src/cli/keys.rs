//! `asof keys create`: an API key made offline, and the Delta Sharing profile that carries it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use asof_engine::Instant;
use clap::Args;

use super::CliResult;
use super::serve::DEFAULT_DATABASE_URL;

#[derive(Debug, Args)]
pub struct KeysCreateArgs {
    #[arg(
        long = "database-url",
        env = "ASOF_DATABASE_URL",
        default_value = DEFAULT_DATABASE_URL,
        hide_env_values = true,
        value_parser = asof_server::secret::SecretUrl::parse
    )]
    pub database_url: asof_server::secret::SecretUrl,
    #[arg(long)]
    pub email: String,
    /// researcher, power or desk.
    #[arg(long)]
    pub plan: String,
    #[arg(long, default_value = "default")]
    pub name: Option<String>,
    /// Expiry instant, RFC 3339 UTC with Z, in the future.
    #[arg(long = "expires-at")]
    pub expires_at: Option<String>,
    /// Also write a Delta Sharing profile file holding the new key here (mode 0600), for
    /// `delta_sharing.load_as_pandas("<file>#asof.sec_edgar.certified_pit")` and Spark.
    #[arg(long = "delta-sharing-profile")]
    pub delta_sharing_profile: Option<PathBuf>,
    /// The service's public origin the profile points at (its `/delta-sharing` endpoint).
    #[arg(
        long = "public-url",
        env = "ASOF_PUBLIC_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub public_url: String,
}

pub(crate) async fn keys_create(a: KeysCreateArgs) -> CliResult {
    let plan: asof_server::plan::Plan = a.plan.parse().map_err(|()| {
        asof_engine::Error::invalid(
            "--plan",
            format!("{:?} is not one of: researcher, power, desk", a.plan),
        )
    })?;
    if !a.email.contains('@') {
        return Err(asof_engine::Error::invalid("--email", "not an e-mail address").into());
    }
    let expires_at = a
        .expires_at
        .as_deref()
        .map(|s| Instant::parse_param("--expires-at", s))
        .transpose()?;
    if expires_at.is_some_and(|e| e <= Instant::now()) {
        return Err(asof_engine::Error::invalid("--expires-at", "must be in the future").into());
    }
    let store = asof_server::state::open(a.database_url.expose()).await?;
    let user = store.upsert_user(&a.email, plan).await?;
    let (key, raw) = store
        .create_key(&user.id, a.name.as_deref().unwrap_or("default"), expires_at)
        .await?;
    eprintln!(
        "created {} ({}) for {} on plan {}",
        key.id, key.prefix, user.email, user.plan
    );
    if let Some(path) = &a.delta_sharing_profile {
        write_profile(path, &a.public_url, &raw, expires_at)?;
        eprintln!("wrote the Delta Sharing profile {}", path.display());
    }
    println!("{raw}");
    Ok(ExitCode::SUCCESS)
}

/// A Delta Sharing profile file (`shareCredentialsVersion` 1): the endpoint, the key as its
/// bearer token and, when the key expires, when. Written owner-readable only: it is a secret.
pub(crate) fn write_profile(
    path: &std::path::Path,
    public_url: &str,
    key: &str,
    expires_at: Option<Instant>,
) -> Result<(), Box<dyn std::error::Error>> {
    let url = url::Url::parse(public_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            asof_engine::Error::invalid(
                "--public-url",
                "an http(s) origin such as https://asof.example",
            )
        })?;
    let mut profile = serde_json::json!({
        "shareCredentialsVersion": 1,
        "endpoint": format!("{}/delta-sharing", url.as_str().trim_end_matches('/')),
        "bearerToken": key,
    });
    if let Some(e) = expires_at {
        profile["expirationTime"] = serde_json::Value::String(e.to_string());
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts
        .open(path)
        .map_err(|e| format!("--delta-sharing-profile {}: {e}", path.display()))?;
    writeln!(f, "{}", serde_json::to_string_pretty(&profile)?)?;
    Ok(())
}
