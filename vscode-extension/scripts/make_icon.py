"""Draws images/icon.png (256x256): a GPU die with a newt's tail curling across it.

Run with any Python that has Pillow: python scripts/make_icon.py
"""

import math
import os

from PIL import Image, ImageDraw, ImageFilter

S = 1024  # drawn at 4x and downsampled for smooth edges
OUT = os.path.join(os.path.dirname(__file__), "..", "images", "icon.png")


def lerp(a, b, t):
    return tuple(int(a[i] + (b[i] - a[i]) * t) for i in range(3))


def main():
    img = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    # pins on the four sides
    pin = (140, 150, 160, 255)
    for i in range(6):
        p = 250 + i * 105
        for box in ((p - 22, 70, p + 22, 200), (p - 22, S - 200, p + 22, S - 70),
                    (70, p - 22, 200, p + 22), (S - 200, p - 22, S - 70, p + 22)):
            d.rounded_rectangle(box, radius=14, fill=pin)
    # the die: a vertical gradient in a rounded square
    die = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    grad = Image.new("RGBA", (S, S))
    gd = ImageDraw.Draw(grad)
    top, bottom = (18, 120, 96), (10, 60, 70)
    for y in range(S):
        gd.line([(0, y), (S, y)], fill=lerp(top, bottom, y / S) + (255,))
    mask = Image.new("L", (S, S), 0)
    ImageDraw.Draw(mask).rounded_rectangle((150, 150, S - 150, S - 150), radius=90, fill=255)
    die.paste(grad, (0, 0), mask)
    img = Image.alpha_composite(img, die)
    d = ImageDraw.Draw(img)
    d.rounded_rectangle((150, 150, S - 150, S - 150), radius=90, outline=(120, 230, 190, 255), width=14)
    # a faint tile grid on the die (tiles of a kernel)
    for k in range(1, 6):
        x = 150 + k * (S - 300) / 6
        d.line([(x, 190), (x, S - 190)], fill=(255, 255, 255, 28), width=4)
        d.line([(190, x), (S - 190, x)], fill=(255, 255, 255, 28), width=4)
    # the newt: a body along a spiral, thick at the head and thin at the tail, with four legs
    body = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    bd = ImageDraw.Draw(body)
    cx, cy = S / 2 - 70, S / 2 - 30
    pts = []
    n = 220
    for i in range(n):
        t = i / (n - 1)
        ang = -0.6 + t * 4.6
        r = 260 - t * 200
        pts.append((cx + r * math.cos(ang), cy + r * math.sin(ang), 62 * (1 - t) ** 0.8 + 8))
    color = (255, 170, 40, 255)
    for x, y, w in pts:
        bd.ellipse((x - w / 2, y - w / 2, x + w / 2, y + w / 2), fill=color)
    hx, hy, _ = pts[0]
    bd.ellipse((hx - 52, hy - 46, hx + 52, hy + 46), fill=color)
    for idx in (18, 60):  # legs at the shoulders and hips
        x, y, w = pts[idx]
        x2, y2, _ = pts[idx + 4]
        ang = math.atan2(y2 - y, x2 - x) + math.pi / 2
        for side in (-1, 1):
            lx, ly = x + side * 70 * math.cos(ang), y + side * 70 * math.sin(ang)
            bd.line([(x, y), (lx, ly)], fill=color, width=26)
            bd.ellipse((lx - 20, ly - 20, lx + 20, ly + 20), fill=color)
    # eyes
    ex, ey = hx + 10, hy - 18
    for dx in (-22, 22):
        bd.ellipse((ex + dx - 10, ey - 10, ex + dx + 10, ey + 10), fill=(20, 40, 40, 255))
    shadow = body.filter(ImageFilter.GaussianBlur(18))
    shadow_px = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    shadow_px.paste((0, 0, 0, 120), (12, 16), shadow)
    img = Image.alpha_composite(img, shadow_px)
    img = Image.alpha_composite(img, body)
    img.resize((256, 256), Image.LANCZOS).save(OUT)
    print(OUT)


if __name__ == "__main__":
    main()
