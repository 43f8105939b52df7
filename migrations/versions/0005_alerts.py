"""alerts: rules, subscriptions, webhook endpoints, alert state, the event outbox, deliveries

Revision ID: 0005_alerts
Revises: 0001_core
Create Date: 2026-11-30 22:07:53.886469
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel.sql.sqltypes


revision = '0005_alerts'
down_revision = '0001_core'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('alert_rule',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rule_key', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('population', sa.JSON(), nullable=False),
    sa.Column('title', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('built_in', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('last_evaluated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_rule')),
    sa.UniqueConstraint('rule_key', name=op.f('uq_alert_rule_rule_key'))
    )
    with op.batch_alter_table('alert_rule', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_rule_kind'), ['kind'], unique=False)

    op.create_table('alert_subscription',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('public_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('owner_token_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('send_resolved', sa.Boolean(), nullable=False),
    sa.Column('feed_token', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('email', sqlmodel.sql.sqltypes.AutoString(length=320), nullable=True),
    sa.Column('email_status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('email_confirm_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('email_confirmed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('email_unsubscribe_token', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_subscription')),
    sa.UniqueConstraint('email_unsubscribe_token', name=op.f('uq_alert_subscription_email_unsubscribe_token')),
    sa.UniqueConstraint('feed_token', name=op.f('uq_alert_subscription_feed_token')),
    sa.UniqueConstraint('public_id', name=op.f('uq_alert_subscription_public_id'))
    )
    with op.batch_alter_table('alert_subscription', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_subscription_email_confirm_hash'), ['email_confirm_hash'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_subscription_owner_token_hash'), ['owner_token_hash'], unique=False)

    op.create_table('alert',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('rule_id', sa.Integer(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('stateful', sa.Boolean(), nullable=False),
    sa.Column('baseline', sa.Boolean(), nullable=False),
    sa.Column('value', sa.Float(), nullable=True),
    sa.Column('summary', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('resolved_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('last_evaluated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('last_notified_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('notifications', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['rule_id'], ['alert_rule.id'], name=op.f('fk_alert_rule_id_alert_rule')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert')),
    sa.UniqueConstraint('fingerprint', name=op.f('uq_alert_fingerprint'))
    )
    with op.batch_alter_table('alert', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_rule_id'), ['rule_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_status'), ['status'], unique=False)

    op.create_table('alert_notice',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('public_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('message', sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('email_status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.ForeignKeyConstraint(['subscription_id'], ['alert_subscription.id'], name=op.f('fk_alert_notice_subscription_id_alert_subscription')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_notice')),
    sa.UniqueConstraint('public_id', name=op.f('uq_alert_notice_public_id'))
    )
    with op.batch_alter_table('alert_notice', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_notice_subscription_id'), ['subscription_id'], unique=False)

    op.create_table('alert_subscription_rule',
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('rule_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['rule_id'], ['alert_rule.id'], name=op.f('fk_alert_subscription_rule_rule_id_alert_rule')),
    sa.ForeignKeyConstraint(['subscription_id'], ['alert_subscription.id'], name=op.f('fk_alert_subscription_rule_subscription_id_alert_subscription')),
    sa.PrimaryKeyConstraint('subscription_id', 'rule_id', name=op.f('pk_alert_subscription_rule'))
    )
    with op.batch_alter_table('alert_subscription_rule', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_subscription_rule_rule_id'), ['rule_id'], unique=False)

    op.create_table('webhook_endpoint',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
    sa.Column('secret', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('disabled_reason', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('disabled_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('consecutive_failures', sa.Integer(), nullable=False),
    sa.Column('last_success_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('last_failure_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['subscription_id'], ['alert_subscription.id'], name=op.f('fk_webhook_endpoint_subscription_id_alert_subscription')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_endpoint')),
    sa.UniqueConstraint('subscription_id', name=op.f('uq_webhook_endpoint_subscription_id'))
    )
    op.create_table('alert_event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('public_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('alert_id', sa.Integer(), nullable=False),
    sa.Column('sequence', sa.Integer(), nullable=False),
    sa.Column('type', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('summary', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('crawl_run_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['alert_id'], ['alert.id'], name=op.f('fk_alert_event_alert_id_alert')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_event')),
    sa.UniqueConstraint('alert_id', 'sequence', name='uq_alert_event_alert_sequence'),
    sa.UniqueConstraint('public_id', name=op.f('uq_alert_event_public_id'))
    )
    with op.batch_alter_table('alert_event', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_event_alert_id'), ['alert_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_event_created_at'), ['created_at'], unique=False)

    op.create_table('alert_delivery',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.Integer(), nullable=False),
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('channel', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('webhook_id', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('last_attempt_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('delivered_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['alert_event.id'], name=op.f('fk_alert_delivery_event_id_alert_event')),
    sa.ForeignKeyConstraint(['subscription_id'], ['alert_subscription.id'], name=op.f('fk_alert_delivery_subscription_id_alert_subscription')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_delivery')),
    sa.UniqueConstraint('event_id', 'subscription_id', 'channel', name='uq_alert_delivery_target'),
    sa.UniqueConstraint('webhook_id', name=op.f('uq_alert_delivery_webhook_id'))
    )
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_delivery_event_id'), ['event_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_delivery_next_attempt_at'), ['next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_delivery_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_delivery_subscription_id'), ['subscription_id'], unique=False)

    op.create_table('alert_delivery_attempt',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('delivery_id', sa.Integer(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('manual', sa.Boolean(), nullable=False),
    sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('duration_ms', sa.Integer(), nullable=True),
    sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('response_excerpt', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('retry_after_s', sa.Float(), nullable=True),
    sa.Column('target_ip', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.ForeignKeyConstraint(['delivery_id'], ['alert_delivery.id'], name=op.f('fk_alert_delivery_attempt_delivery_id_alert_delivery')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_delivery_attempt'))
    )
    with op.batch_alter_table('alert_delivery_attempt', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_delivery_attempt_delivery_id'), ['delivery_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('alert_delivery_attempt', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_delivery_attempt_delivery_id'))

    op.drop_table('alert_delivery_attempt')
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_delivery_subscription_id'))
        batch_op.drop_index(batch_op.f('ix_alert_delivery_status'))
        batch_op.drop_index(batch_op.f('ix_alert_delivery_next_attempt_at'))
        batch_op.drop_index(batch_op.f('ix_alert_delivery_event_id'))

    op.drop_table('alert_delivery')
    with op.batch_alter_table('alert_event', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_event_created_at'))
        batch_op.drop_index(batch_op.f('ix_alert_event_alert_id'))

    op.drop_table('alert_event')
    op.drop_table('webhook_endpoint')
    with op.batch_alter_table('alert_subscription_rule', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_subscription_rule_rule_id'))

    op.drop_table('alert_subscription_rule')
    with op.batch_alter_table('alert_notice', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_notice_subscription_id'))

    op.drop_table('alert_notice')
    with op.batch_alter_table('alert', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_status'))
        batch_op.drop_index(batch_op.f('ix_alert_rule_id'))

    op.drop_table('alert')
    with op.batch_alter_table('alert_subscription', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_subscription_owner_token_hash'))
        batch_op.drop_index(batch_op.f('ix_alert_subscription_email_confirm_hash'))

    op.drop_table('alert_subscription')
    with op.batch_alter_table('alert_rule', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_rule_kind'))

    op.drop_table('alert_rule')
