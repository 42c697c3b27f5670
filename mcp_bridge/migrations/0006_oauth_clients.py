"""Every way to sign in (issue 25 part 5): pre-registered clients (sealed), the token
endpoint method, scope and issuer of a server, machine-to-machine mode, and the scope a
step-up asked for on a grant (docs/mcp-client.md, "Signing in")."""

from django.db import migrations, models

import mcp_bridge.sealed_fields


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_bridge", "0005_server_log"),
    ]

    operations = [
        migrations.AlterField(
            model_name="mcpserver",
            name="auth_mode",
            field=models.CharField(
                choices=[
                    ("none", "None"),
                    ("headers", "Static headers"),
                    ("oauth_shared", "OAuth, one shared grant"),
                    ("oauth_member", "OAuth, each member their own"),
                    ("oauth_machine", "OAuth client credentials (machine to machine)"),
                ],
                default="none",
                help_text="OAuth modes sign in with the server's authorization server (docs/oauth.md).",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="mcpserver",
            name="oauth_client",
            field=mcp_bridge.sealed_fields.SealedJSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="mcpserver",
            name="oauth_token_auth",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "Automatic (basic with a secret, none without)"),
                    ("client_secret_basic", "Client secret, HTTP Basic"),
                    ("client_secret_post", "Client secret in the request body"),
                    ("private_key_jwt", "Private key JWT (client credentials only)"),
                    ("none", "None (public client)"),
                ],
                default="",
                max_length=30,
                verbose_name="token endpoint authentication",
            ),
        ),
        migrations.AddField(
            model_name="mcpserver",
            name="oauth_scope",
            field=models.CharField(
                blank=True,
                help_text="Scope to ask for (client credentials; empty: what the server names).",
                max_length=500,
                verbose_name="OAuth scope",
            ),
        ),
        migrations.AddField(
            model_name="mcpserver",
            name="oauth_issuer",
            field=models.URLField(
                blank=True,
                help_text="For a pre-registered client: the only authorization server its "
                "credentials are sent to (client credentials).",
                max_length=500,
                verbose_name="authorization server issuer",
            ),
        ),
        migrations.AddField(
            model_name="oauthgrant",
            name="wanted_scope",
            field=models.CharField(blank=True, max_length=500),
        ),
    ]
